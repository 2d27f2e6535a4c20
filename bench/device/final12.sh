#!/usr/bin/env bash
# 2026-12-04 twelfth session, closing call: the merged main (staged x as fp16 for FP8 weights
# under bf16; fp8 refills by halves) beside cbfe23d: device tests of the GEMV, the quantized
# backend and the CUDA backend, and e2e 8B bf16 / AWQ / FP8 at B=1 and B=8 (4k), one round each.
# Prediction: FP8 B=1 -1% (3.05 -> ~3.02), 1B not run; bf16 and AWQ within +-0.5% (int4 and
# dense code paths unchanged). Bundle .device/final12; call: carry [".device/final12.tar.xz"].
set -u
source "$(dirname "$0")/common.sh"
unpack final12
RD=$OUT/r; mkdir -p "$RD"
el "final12 $(cat $B/REVISION | tr '\n' ' ')"
parallel_tests "$RD/tests" gemv_device_test:200 quantized_backend_device_test:200 \
  cuda_backend_device_test:240
pack
L=(--quant awq,fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for bin in pkv-bench-base pkv-bench; do
  e2e_line "$R" $bin "$bin" "$RD" --shapes llama3-8b "${L[@]}"; pack
done
el done
grep -E "rc=|bucketed" "$S"
