#!/usr/bin/env bash
# The twenty-third session's served check of the bulk GEMV's auto default: router + one worker,
# 8B shape, 4k prompts at B=1 (issue 14's served line), the worker's default
# (--fused_gemv_bulk=auto: gate/up and down on the bulk GEMV) against --fused_gemv_bulk=none,
# then auto again (a drift check).
# Bundle: bash bench/device/bundle.sh served pkv-worker pkv-router pkv pkv-make-model
# Call: carry [".device/served.tar.xz"], `bash bench/device/call26.sh` (~3 min).
set -u
source "$(dirname "$0")/common.sh"
start_call served
C=$RD/served; mkdir -p "$C"
timeout 200 "$R" pkv-make-model --out /tmp/m-8b --shape llama3-8b > "$C/make_8b.log" 2>&1
echo "rc=$? make 8b" >> "$S"
for run in "auto1|auto" "none|none" "auto2|auto"; do
  IFS="|" read -r tag bulk <<< "$run"
  time_for 45 "served $tag" && serve_model "$tag" /tmp/m-8b "$C" --fused_gemv_bulk=$bulk
  grep -m1 -o "bulk GEMV [a-z,]*" "$C/worker_$tag.log" | sed "s/^/$tag /" >> "$S"
  pack
done
el done
cat "$S"
