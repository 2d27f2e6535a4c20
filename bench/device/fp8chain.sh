#!/usr/bin/env bash
# 2026-12-04 twelfth session, second call. fp8stage showed the per-step x conversion was not what
# bounds the 8B FP8 GEMVs (8B FP8 B=1 3.07-3.09 ms with or without it; 1B FP8 -2.8%). Reading:
# a warp has no loads in flight while it computes a batch, and an FP8 batch computes twice the
# steps of a bf16 one in one dependent MMA chain (16 HMMAs a batch, one accumulator).
#   v1 (pkv-bench-v1): staged x as fp16 (951c1a5 without the plain staging) = the base here;
#   A: two accumulator sets alternating by unit (chain halved), dense and fp8;
#   B: A + fp8 refills its batch by halves (loads in flight during the other half's compute);
#   C: refill by halves only.
# Prediction: 8B FP8 gate/up (1 token) 40 -> ~34 us (B), down/o -10%; e2e 8B FP8 B=1 3.07 ->
# ~2.85 ms; dense within +-2% (A's shorter chain may give dense 0-2%).
# Bundle .device/fp8chain: pkv-bench-{base,v1,A,B,C}, gemv + quantized backend device tests (B).
# Call: carry [".device/fp8chain.tar.xz"], `bash bench/device/fp8chain.sh` (~5 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack fp8chain
RD=$OUT/r; mkdir -p "$RD"
el "fp8chain $(cat $B/REVISION | tr '\n' ' ')"
parallel_tests "$RD/tests" gemv_device_test:200 quantized_backend_device_test:200
G=(gemv --dtype bf16 --iters 200 --tokens 1,8 --formats dense,fp8 --gemv_shapes 8B)
for bin in base v1 A B C; do
  for in in rmsnorm plain; do
    timeout 60 "$R" pkv-bench-$bin "${G[@]}" --input $in --out "$RD/gemv_${bin}_$in.tsv" \
      > "$RD/gemv_${bin}_$in.log" 2>&1
    echo "rc=$? gemv $bin $in" >> "$S"
  done
done
pack
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for bin in v1 A B C v1; do
  e2e_line "$R" pkv-bench-$bin "$bin" "$RD" --shapes llama3-8b "${L[@]}"
  pack
done
el done
cat "$S"
