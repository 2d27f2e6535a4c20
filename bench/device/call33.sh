#!/usr/bin/env bash
# The twenty-fourth session's last call: main's defaults (every projection on the bulk GEMV) on
# whatever card comes (issue 14's bars were set on the H200): served 8B and 1B B=1 through router +
# worker, e2e default vs no bulk at B=1 / B=8, and step timelines of the default at B=1 (the
# per-layer picture the next lever starts from).
# Bundle: bash bench/device/bundle.sh final pkv-worker pkv-router pkv pkv-make-model pkv-bench --variant "tl:-DPKV_TIMELINE=ON"
# Call: carry [".device/final.tar.xz"], `bash bench/device/call33.sh` (~2.5 min).
set -u
source "$(dirname "$0")/common.sh"
start_call final
C=$RD/final; mkdir -p "$C/timeline"
for shape in 8b 1b; do
  time_for 60 "served $shape" || continue
  timeout 200 "$R" pkv-make-model --out /tmp/m-$shape --shape llama3-$shape > "$C/make_$shape.log" 2>&1
  echo "rc=$? make $shape" >> "$S"
  serve_model "$shape" /tmp/m-$shape "$C"
  pack
done
P=fused+pdl+prenorm
time_for 40 "e2e" && { e2e_line "$R" pkv-bench ab "$C" --shapes llama3-8b,llama3-1b \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 --variants "$P+overlap,$P+bulk:none+overlap"
  e2e_summary ab "$C"; pack; }
time_for 30 "timeline" && { e2e_line "$R" pkv-bench-tl tl "$C" --shapes llama3-8b,llama3-1b \
  --decode_lines bucketed-B1-N4096 --variants "$P+overlap" --timeline_dir "$C/timeline"
  e2e_summary tl "$C"; }
timeline_reports "$C/timeline"
pack
el done
cat "$S"
