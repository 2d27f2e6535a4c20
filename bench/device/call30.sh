#!/usr/bin/env bash
# The twenty-fourth session's second form of the attention trigger (issue 14): only a CTA that
# merges a split row triggers, just before its merge (CudaBackendOptions::attention_trigger_at_merge,
# e2e suffix "+mtrig"), so the o GEMV launches once every other attention CTA has exited and is
# placed on SMs free but for the merges. Refuted (call30); the option is not on main: 35835c4
# has it (its diff: bench/device/mtrig-35835c4.patch). call29's first form (every CTA after its
# tiles) placed the o GEMV beside running attention CTAs: 8B B=1 -0.15%, 1B B=1 +15%, B=8
# +18..35%.
# 1. cuda_backend_device_test: every _w8 model case (the two _mtrig ones, their controls; CPU oracle).
# 2. e2e A/B, 8B and 1B at B=1 and B=8, two orders.
# 3. timelines (pkv-bench-tl) of 8B and 1B B=1 with and without it.
# Bundle: bash bench/device/bundle.sh tl pkv-bench cuda_backend_device_test --variant "tl:-DPKV_TIMELINE=ON"
# Call: carry [".device/tl.tar.xz"], `bash bench/device/call30.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
start_call tl
D=$RD/lt; mkdir -p "$D/timeline"
time_for 130 "tests" && RD=$D device_tests \
  "cuda_backend_device_test:120:*_w8*"
P=fused+pdl+prenorm
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
e2e_two_orders "$D" "$P+overlap,$P+mtrig+overlap" "${L[@]}"
time_for 40 "timeline" && {
  e2e_line "$R" pkv-bench-tl tl "$D" --shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096 \
    --variants "$P+overlap,$P+mtrig+overlap" --timeline_dir "$D/timeline"; e2e_summary tl "$D"; }
timeline_reports "$D/timeline"
pack
el done
cat "$S"
