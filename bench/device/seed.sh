#!/usr/bin/env bash
# The device tests that seed from TestSeed() (tests/harness/test_seed.h: seed 1 unless
# --gtest_random_seed) run once with the new fixed seed (2026-12-03, tenth session). Bundle
# .device/seed: gemv, sampling_kernel, skinny_gemm, prefill_attention, fp8_kv, gemm_tune device
# tests. Call: carry [".device/seed.tar.xz"], `bash bench/device/seed.sh` (~1-2 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack seed
el "seed $(cat $B/REVISION)"
parallel_tests "$OUT/r" gemv_device_test:150 sampling_kernel_device_test:150 \
  skinny_gemm_device_test:150 prefill_attention_device_test:150 fp8_kv_device_test:150 \
  gemm_tune_device_test:150
tar -C "$OUT" -czf "$OUT/results.tgz" r
cat "$S"
