#!/usr/bin/env bash
# 2026-12-04 twelfth session, third call. fp8chain: the isolated FP8 GEMVs stream their bytes
# at dense's marginal rate (~4.8 TB/s between the FP8 and dense times of a shape) plus a
# fixed ~5-11 us a launch; two accumulators or refilling by halves moved the GEMV by <2%, e2e
# 8B FP8 B=1 by -1.3% (C, refill by halves) in one sample.
#   v1: staged x as fp16 (951c1a5, plain staging off);  C: v1 + fp8 refill by halves (a0a1fda
#   0/1);  D: C + the FP8 gate/up (rmsnorm, staged, several items a CTA) on deep batches (8 units:
#   a warp's whole k = 4096 item in flight at once) at 2 CTAs an SM (a8beaf6).
# Prediction: FP8 gate/up T=1 chain 35 -> ~31 us (D); e2e 8B FP8 B=1 3.00 -> ~2.90 ms; B=8 and
# dense unchanged (D launches deep only where staged: T <= 2 for gate/up).
# Bundle .device/fp8deep: pkv-bench-{v1,C,D}, gemv + quantized backend device tests (D).
set -u
source "$(dirname "$0")/common.sh"
unpack fp8deep
RD=$OUT/r; mkdir -p "$RD"
el "fp8deep $(cat $B/REVISION | tr '\n' ' ')"
parallel_tests "$RD/tests" gemv_device_test:200 quantized_backend_device_test:200
G=(gemv --dtype bf16 --iters 200 --tokens 1,2,8 --formats dense,fp8 --gemv_shapes 8B --input rmsnorm)
for bin in v1 C D; do
  timeout 60 "$R" pkv-bench-$bin "${G[@]}" --out "$RD/gemv_$bin.tsv" > "$RD/gemv_$bin.log" 2>&1
  echo "rc=$? gemv $bin" >> "$S"
done
pack
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for bin in v1 C D; do
  e2e_line "$R" pkv-bench-$bin "${bin}_1" "$RD" --shapes llama3-8b,llama3-1b "${L[@]}"; pack
done
for bin in D C v1; do
  e2e_line "$R" pkv-bench-$bin "${bin}_2" "$RD" --shapes llama3-8b "${L[@]}"; pack
done
el done
grep -E "rc=|fp8 bucketed|llama3-8b bucketed-B1" "$S"
