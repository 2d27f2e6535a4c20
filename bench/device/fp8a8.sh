#!/usr/bin/env bash
# 2026-12-04 thirteenth session: prototype W8A8 FP8 GEMV (branch fp8a8, PKV_GEMV_FP8_A8=1;
# NOTES "Thirteenth session"): staged x quantized once per CTA to e4m3 (a scale per token), one
# m16n8k32 e4m3 MMA a step. pkv-bench (A8) beside main's pkv-bench-base; device tests of the
# GEMV and quantized backend built with A8 (W8A8 adds activation rounding: their tolerances were
# set for W8A16, so failures here measure the error). Bundle .device/fp8a8. Call: carry
# [".device/fp8a8.tar.xz"], `bash bench/device/fp8a8.sh` (~2 min warm).
set -u
source "$(dirname "$0")/common.sh"
start_call fp8a8
parallel_tests "$RD/tests" gemv_device_test:100 quantized_backend_device_test:100
grep -hE "Failure|FAILED|Expected|Which is|actual|diff" "$RD"/tests/*.txt | head -12 >> "$S"
pack
for in in rmsnorm plain; do
  for bin in pkv-bench-base pkv-bench; do
    gemv_line $bin $in "$RD" --iters 30 --tokens 1 --formats fp8
  done
done
pack
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096)
for bin in pkv-bench-base pkv-bench; do
  e2e_line "$R" $bin "$bin" "$RD" --shapes llama3-8b "${L[@]}"; pack
done
el done
