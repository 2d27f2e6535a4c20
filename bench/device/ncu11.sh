#!/usr/bin/env bash
# One B=1 decode step per kernel (ncu; clocks and caches left alone; kernels serialised) of the
# 8B shape with FP8 and with AWQ weights (each run also profiles the bf16 twin first): where the
# quantized steps spend their time against their byte floors (issue 13: FP8 1.39x bf16, bar
# 1.7x; AWQ 1.77x, bar 2.5x). Binary: main's pkv-bench (.device/l2kv's pkv-bench-base).
# Call: carry [".device/l2kv.tar.xz"], `bash bench/device/ncu11.sh` (~1 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack l2kv
RD=$OUT/r; mkdir -p "$RD"
ncu_env
for quant in fp8 awq; do
  timeout 250 "$NCU" --clock-control none --cache-control none --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
    "$B/bin/pkv-bench-base" e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
    --drift_prompts 0 --shapes llama3-8b --quant $quant --decode_lines bucketed-B1-N4096 \
    --variants fused+pdl --warmup 1 --steps 1 > "$RD/ncu_8b_$quant.csv" 2> "$RD/ncu_8b_$quant.err"
  echo "rc=$? ncu 8b $quant $(wc -l < "$RD/ncu_8b_$quant.csv") lines" >> "$S"
  gzip -f "$RD/ncu_8b_$quant.csv"
  pack
done
el done
cat "$S"
