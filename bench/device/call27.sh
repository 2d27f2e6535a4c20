#!/usr/bin/env bash
# The twenty-fourth session's H200 check of issue 14's served lines with the worker's defaults
# (bulk GEMV auto: gate/up and down at hidden >= 4096; w8s3 for B <= 2): router + one worker,
# 4k prompts at B=1, 8B with --fused_gemv_bulk=auto vs none vs auto (call26 on an H100 had auto
# +0.75% in served while e2e had it -0.3%), then 1B with the defaults; then e2e at B=1/B=8 auto vs
# none in two orders (call25's lines), so served and e2e sit side by side on one card.
# Bundle: bash bench/device/bundle.sh served pkv-worker pkv-router pkv pkv-make-model pkv-bench
# Call: kind nvidia-h200, carry [".device/served.tar.xz"], `bash bench/device/call27.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
start_call served
C=$RD/served; mkdir -p "$C"
for shape in 8b 1b; do
  timeout 200 "$R" pkv-make-model --out /tmp/m-$shape --shape llama3-$shape > "$C/make_$shape.log" 2>&1
  echo "rc=$? make $shape" >> "$S"
done
for run in "8b_auto1|8b|auto" "8b_none|8b|none" "8b_auto2|8b|auto" "1b_auto|1b|auto"; do
  IFS="|" read -r tag shape bulk <<< "$run"
  time_for 45 "served $tag" && serve_model "$tag" /tmp/m-$shape "$C" --fused_gemv_bulk=$bulk
  grep -m1 -o "bulk GEMV [a-z,]*" "$C/worker_$tag.log" | sed "s/^/$tag /" >> "$S"
  pack
done
P=fused+pdl+prenorm
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for run in "ab1|$P+overlap,$P+bulk:none+overlap" "ab2|$P+bulk:none+overlap,$P+overlap"; do
  IFS="|" read -r tag vs <<< "$run"
  time_for 40 "e2e $tag" && { e2e_line "$R" pkv-bench $tag "$C" "${L[@]}" --variants "$vs"; e2e_summary $tag "$C"; pack; }
done
el done
cat "$S"
