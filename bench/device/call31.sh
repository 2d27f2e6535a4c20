#!/usr/bin/env bash
# The twenty-fourth session's bulk-set check after the timeline (issue 14): call28's timeline
# showed the qkv GEMV after a bulk down 2.7 us a layer slower than after a register down (8B B=1,
# H100: the shared-memory carveout a bulk kernel leaves on the SM), so the 8B auto set (gate/up,
# down) may do better with qkv on the bulk kernel too. e2e 8B B=1 and B=8, sets: auto (gate/up,
# down), qkv+gate/up+down, every projection, none; two orders; 1B B=1 auto (none) vs every
# projection vs o+gate/up+down; then timelines of the 8B sets.
# Bundle: the tl bundle of call30 (35835c4's tree; these variants do not use +mtrig).
# Call: carry [".device/tl.tar.xz"], `bash bench/device/call31.sh` (~2 min).
set -u
source "$(dirname "$0")/common.sh"
start_call tl
D=$RD/bq; mkdir -p "$D/timeline"
P=fused+pdl+prenorm
A=$P+overlap Q=$P+bulk:qkv.gateup.down+overlap W=$P+bulk:qkv.o.gateup.down+overlap N=$P+bulk:none+overlap
L=(--shapes llama3-8b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
e2e_two_orders "$D" "$A,$Q,$W,$N" "${L[@]}"
# 1B (auto: no bulk): every register GEMV there runs after a kernel that took a large carveout
# (attention before o) or none; all-bulk and o+gate/up+down remove the register kernels' share.
B=(--shapes llama3-1b --decode_lines bucketed-B1-N4096)
O=$P+bulk:o.gateup.down+overlap
for run in "ab1b|$A,$W,$O" "ab2b|$O,$W,$A"; do
  IFS="|" read -r tag vs <<< "$run"
  time_for 30 "e2e $tag" && { e2e_line "$R" pkv-bench $tag "$D" "${B[@]}" --variants "$vs"; e2e_summary $tag "$D"; pack; }
done
time_for 40 "timeline" && {
  e2e_line "$R" pkv-bench-tl tl "$D" --shapes llama3-8b --decode_lines bucketed-B1-N4096 \
    --variants "$A,$Q,$W" --timeline_dir "$D/timeline"; e2e_summary tl "$D"; }
timeline_reports "$D/timeline"
pack
el done
cat "$S"
