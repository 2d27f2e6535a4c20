#!/usr/bin/env bash
# One decode step per kernel (ncu; clocks and caches left alone; kernels serialised, so PDL
# overlap is gone): where the 8B and 1B B=1 fused steps spend their time. Bundle: .device/final9
# (see final9.sh). Call: carry [".device/final9.tar.xz"], `bash bench/device/ncu9.sh`.
set -u
source "$(dirname "$0")/common.sh"
unpack final9
RD=$OUT/r; mkdir -p "$RD"
ncu_env
for shape in llama3-1b llama3-8b; do
  timeout 200 "$NCU" --clock-control none --cache-control none --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
    "$B/bin/pkv-bench" e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
    --drift_prompts 0 --shapes $shape --decode_lines bucketed-B1-N4096 --variants fused+pdl \
    --warmup 1 --steps 1 > "$RD/ncu_$shape.csv" 2> "$RD/ncu_$shape.err"
  echo "rc=$? ncu $shape $(wc -l < "$RD/ncu_$shape.csv") lines" >> "$S"
  gzip -f "$RD/ncu_$shape.csv"
  tar -C "$OUT" -czf "$OUT/results.tgz" r
done
el done
cat "$S"
