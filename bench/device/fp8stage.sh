#!/usr/bin/env bash
# 2026-12-04 twelfth session. FP8 weights of a bf16 model (issue 13, bar 1.7x bf16 at B=1; 1.48x
# at cbfe23d): the fp16 MMAs' x words converted once per CTA instead of at every step.
#   v1 (pkv-bench-v1): staged x (rmsnorm inputs: qkv, gate/up) stored as fp16 by StageX;
#   v2 (pkv-bench):    v1 + plain inputs (o, down) of FP8 plans staged at one token (the deep
#                      kernels with staged x), so no step converts x.
# Prediction: 8B FP8 B=1 3.09 -> ~2.95 (v1) -> ~2.85 ms (v2); B=8 unchanged (x per step there
# beyond 2 tokens) within 1%; bf16 lines unchanged; device tests pass. ncu: FP8 GEMVs' pipe use
# and issue activity, base vs v2 (what binds after the change).
# Bundle .device/fp8stage: pkv-bench (v2), pkv-bench-v1, pkv-bench-base (main cbfe23d), gemv and
# quantized backend device tests (v2). Call: carry [".device/fp8stage.tar.xz"],
# `bash bench/device/fp8stage.sh` (~4 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack fp8stage
RD=$OUT/r; mkdir -p "$RD"
el "fp8stage $(cat $B/REVISION)"
parallel_tests "$RD/tests" gemv_device_test:200 quantized_backend_device_test:200
pack
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for round in 1 2; do
  bins="pkv-bench-base pkv-bench-v1 pkv-bench"
  [ $round = 2 ] && bins="pkv-bench pkv-bench-v1 pkv-bench-base"
  for bin in $bins; do
    e2e_line "$R" $bin "${bin}_$round" "$RD" --shapes llama3-8b,llama3-1b "${L[@]}"
  done
  pack
done
ncu_env
for bin in pkv-bench-base pkv-bench; do
  timeout 200 "$NCU" --clock-control none --cache-control none --csv --page raw \
    --kernel-name regex:GemvKernel --launch-skip 8 --launch-count 8 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section InstructionStats --section LaunchStats \
    "$B/bin/$bin" e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
    --drift_prompts 0 --shapes llama3-8b --quant fp8 --decode_lines bucketed-B1-N4096 \
    --variants fused+pdl --warmup 1 --steps 1 > "$RD/ncu_$bin.csv" 2> "$RD/ncu_$bin.err"
  echo "rc=$? ncu $bin $(wc -l < "$RD/ncu_$bin.csv") lines" >> "$S"
  gzip -f "$RD/ncu_$bin.csv"
  pack
done
el done
cat "$S"
