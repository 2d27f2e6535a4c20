#!/usr/bin/env bash
# The decode route and split size of small steps (B = 1 and 8) timed inside whole fused+pdl steps,
# three interleaved rounds (2026-12-03, tenth session; next10.sh's single round suggested the 1B
# wants half the items the planner's fill-every-slot rule gives). Bundle .device/warm (its
# pkv-bench at the default attention_l2_warm_bytes 0 runs main's code).
# Call: carry [".device/warm.tar.xz"], `bash bench/device/splitmap.sh` (~5 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack warm
RD=$OUT/r; mkdir -p "$RD"
P=(learned fixed:split:128 fixed:split:256 fixed:split:512 fixed:split:1024 fixed:split:2048
   fixed:workqueue:128 fixed:workqueue:256 fixed:workqueue:512 fixed:workqueue:1024)
for round in 1 2 3; do
  for k in "${!P[@]}"; do
    j=$(( (k + 3 * round) % ${#P[@]} )); pol=${P[$j]}
    e2e_line "$R" pkv-bench "r${round}_${pol//:/_}" "$RD" --shapes llama3-8b,llama3-1b \
      --decode_lines bucketed-B1-N4096,bucketed-B1-N16384,bucketed-B8-N4096 \
      --variants fused+pdl --temperature 1 --decode_policy "$pol"
  done
  pack
done
el done
