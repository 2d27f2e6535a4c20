#!/usr/bin/env bash
# 2026-12-03 eleventh session. Branch `fp8h16`: FP8 weights of a bf16 model run the GEMV's MMAs in
# fp16 (one cvt per e4m3 pair instead of five instructions; x converted per step; same products).
# ncu11 had the FP8 projections at 1.5-2.9 TB/s where bf16's reach 2.7-3.8. Prediction: 8B FP8
# B=1 3.24 -> ~2.95 ms (gate/up 40 -> ~33 us, down 22.6 -> ~18), B=8 -5..-10%; bf16 and AWQ
# lines unchanged; device tests (GEMV FP8 cases against the dequantized reference) pass.
# Bundle .device/fp8h16: the branch's pkv-bench and gemv/quantized device tests, main's
# pkv-bench-base (.device/l2kv's). Call: carry [".device/fp8h16.tar.xz"], `bash
# bench/device/fp8h16.sh` (~3 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack fp8h16
RD=$OUT/r; mkdir -p "$RD"
el "fp8h16 $(cat $B/REVISION)"
parallel_tests "$RD/tests" gemv_device_test:200 quantized_backend_device_test:200
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for bin in $(ab_bins 1); do e2e_line "$R" $bin "${bin}_1" "$RD" --shapes llama3-8b,llama3-1b "${L[@]}"; done
pack
for bin in $(ab_bins 2); do e2e_line "$R" $bin "${bin}_2" "$RD" --shapes llama3-8b "${L[@]}"; done
pack
el done
cat "$S"
