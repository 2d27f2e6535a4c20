#!/usr/bin/env bash
# 2026-12-04 twelfth session, branch `cpring`: dense and fp8 GEMV weights through a per-warp
# cp.async ring of 6 units (12 on deep plans) in shared memory, refilled unit by unit across
# items, so a warp keeps ring - 1 KB in flight while it computes (ncu12: fp8 gate/up warps waited
# on memory only 34% of the time, DRAM 68% of peak; dense 67% / 83%).
# Prediction: fp8 gate/up T=1 37 -> ~31 us, down 21 -> ~17; dense gate/up 59 -> ~56; e2e 8B FP8
# B=1 3.00 -> ~2.75 ms, bf16 4.50 -> ~4.35. Short call (device time nearly spent): gemv device
# test first, then the isolated GEMVs, then e2e if time is left.
# Not run yet (the twelfth session's device time ran out). To prepare: `git apply
# bench/results/2026-12-04-h200-next12/cpring-36115b9.patch` on a branch, build pkv-bench and
# gemv_device_test (sm_90a), device-bundle them into .device/cpring with main's pkv-bench as
# pkv-bench-base, REVISION, strip, tar -cJf .device/cpring.tar.xz. Call: carry
# [".device/cpring.tar.xz"], `bash bench/device/cpring.sh` (~2.5 min warm). Land only if the
# device tests (and the quantized / CUDA backend ones) pass and no e2e line is slower.
set -u
source "$(dirname "$0")/common.sh"
unpack cpring
RD=$OUT/r; mkdir -p "$RD"
el "cpring $(cat $B/REVISION | tr '\n' ' ')"
timeout 50 "$R" gemv_device_test --gtest_brief=1 > "$RD/gemv_device_test.txt" 2>&1
echo "rc=$? gemv_device_test $(grep -E '^\[  (PASSED|FAILED)' "$RD/gemv_device_test.txt" | tr '\n' ' ')" >> "$S"
grep -E "FAILED|Failure" "$RD/gemv_device_test.txt" | head -5 >> "$S"
pack
for in in rmsnorm plain; do
  for bin in pkv-bench-base pkv-bench; do
    timeout 25 "$R" $bin gemv --dtype bf16 --iters 50 --tokens 1 --formats dense,fp8 \
      --gemv_shapes 8B --input $in --out "$RD/gemv_${bin}_$in.tsv" > "$RD/gemv_${bin}_$in.log" 2>&1
    echo "rc=$? gemv $bin $in" >> "$S"
    awk -F'\t' -v b=$bin 'NR>1 {print b, $1, $5, $8, $13}' "$RD/gemv_${bin}_$in.tsv" >> "$S"
  done
  pack
done
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096)
for bin in pkv-bench pkv-bench-base; do
  e2e_line "$R" $bin "$bin" "$RD" --shapes llama3-8b "${L[@]}"; pack
done
el done
grep -vE "decode_attention|scheduler host|weights a decode" "$S"
