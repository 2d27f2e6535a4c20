#!/usr/bin/env bash
# The twenty-fourth session's timeline probe (issue 14): where a B=1 step's ~30 us a layer over
# the byte floor goes, boundary by boundary. pkv-bench-tl is this tree built with -DPKV_TIMELINE
# (every kernel that calls PdlWait records per CTA when it reached the wait, when the wait returned
# and when it left; kernels/common/timeline.h); pkv-bench is the same tree without it, run beside
# it to show what the recording costs. Variants: the default (8B: gate/up and down on the bulk
# GEMV), no bulk, and 1B with o on the bulk GEMV (its +21% chain loss, unexplained).
# Bundle: bash bench/device/bundle.sh tl pkv-bench --variant "tl:-DPKV_TIMELINE=ON"
# Call: carry [".device/tl.tar.xz"], `bash bench/device/call28.sh` (~3 min).
set -u
source "$(dirname "$0")/common.sh"
start_call tl
D=$RD/tl; mkdir -p "$D/timeline"
P=fused+pdl+prenorm
L=(--decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for run in "8b|llama3-8b|$P+overlap,$P+bulk:none+overlap" "1b|llama3-1b|$P+overlap,$P+bulk:o+overlap"; do
  IFS="|" read -r tag shape vs <<< "$run"
  time_for 40 "e2e $tag" || continue
  e2e_line "$R" pkv-bench plain_$tag "$D" --shapes $shape "${L[@]}" --variants "$vs"; e2e_summary plain_$tag "$D"
  e2e_line "$R" pkv-bench-tl tl_$tag "$D" --shapes $shape "${L[@]}" --variants "$vs" \
    --timeline_dir "$D/timeline"; e2e_summary tl_$tag "$D"
  grep timeline: "$D/e2e_tl_$tag.log" | sed "s/^/tl_$tag /" >> "$S"
  pack
done
timeline_reports "$D/timeline"
pack
el done
cat "$S"
