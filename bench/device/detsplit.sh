#!/usr/bin/env bash
# The deterministic mode on split prefill tiles (issue 14; fifteenth session, never run on a GPU):
#   1. determinism.sh on this bundle: determinism_device_test (bitwise alone / together / chunked /
#      recomputed, whole tiles and now split tiles: SplitTilesAreAlsoIndependentOfTheBatch), the
#      served 4-prompt check with --deterministic and with --deterministic_split_tiles too, and
#      pkv-bench e2e with det-split beside det (whole rows), pdl and fused+pdl;
#   2. the prefill device tests: PrefillSplitAttentionTest (split tiles against the CPU reference,
#      and bitwise the same for a row planned whole, in 300-query chunks and as one-query rows)
#      and fp8_kv_device_test (the FP8 prefill and RoPE tests: the same kernel template).
# Bundle (~2 min incremental):
#   bash bench/device/bundle.sh detsplit determinism_device_test pkv-bench pkv-worker pkv-router \
#     pkv pkv-make-model prefill_attention_device_test fp8_kv_device_test
# Call: carry [".device/detsplit.tar.xz"], `bash bench/device/detsplit.sh` (~4 min warm).
# Predictions (bench/NOTES.md "Fifteenth session"): det-split 8B B=1 ~1.08-1.12x pdl (det ~2.1x),
# B=8 alike, bimodal B=64 ~2x (det ~4.6x); every determinism and prefill case passes. Rule: if
# they all pass and det-split is faster on every line, make deterministic_split_tiles the
# default (CudaBackendOptions, WorkerOptions); any failure keeps it off until fixed.
set -u
DET_BUNDLE=detsplit DET_SPLIT=1 bash "$(dirname "$0")/determinism.sh"
source "$(dirname "$0")/common.sh"
B=/tmp/pkv/detsplit; R=$B/run
RD=$OUT/r; mkdir -p "$RD"
parallel_tests "$RD/tests" prefill_attention_device_test:200 fp8_kv_device_test:200
grep -hE "Failure|FAILED" "$RD"/tests/*.txt | head -5 >> "$S"
tar -C "$OUT" --exclude results.tgz -czf "$OUT/results.tgz" .  # determinism.sh's files too
cat "$S"
