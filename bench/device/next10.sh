#!/usr/bin/env bash
# First GPU call for the session after 2026-12-03's ninth (prepared then, not run).
#   1. branch `parts` (ChooseGemvParts splits the 1B q/k/v): bench/device/parts.sh, bundle
#      .device/parts.tar.xz;
#   2. the decode route and split size inside a whole B=1 step (the ncu map's largest per-byte
#      gap: attention 15 us for a 3.7 us floor on 8B, 13.8 for 1.9 on 1B): pkv-bench e2e with
#      --decode_policy fixed:<route>:<min_split_tokens>, bundle .device/b1attn.tar.xz (main
#      e6a5190: device-bundle .device/b1attn pkv-bench; strip; tar -cJf).
# Call: carry [".device/parts.tar.xz", ".device/b1attn.tar.xz"], `bash bench/device/next10.sh`
#   (~3 min warm).
set -u
OUT=${OUT:-/tmp/out}
OUT=$OUT/parts bash "$(dirname "$0")/parts.sh" > /dev/null 2>&1
source "$(dirname "$0")/common.sh"
unpack b1attn
RD=$OUT/r/b1attn; mkdir -p "$RD"
cat "$OUT/parts/summary.txt" >> "$S" 2>/dev/null
el "2. B=1 attention route and split in place ($(cat $B/REVISION))"
for pol in learned fixed:split:128 fixed:split:256 fixed:split:512 fixed:split:1024 \
    fixed:workqueue:128 fixed:workqueue:256 fixed:workqueue:512 fixed:persistent:128 fixed:fused; do
  tag=${pol//:/_}
  e2e_line "$R" pkv-bench "$tag" "$RD" --shapes llama3-8b,llama3-1b \
    --decode_lines bucketed-B1-N4096,bucketed-B1-N16384 --variants fused+pdl --temperature 1 \
    --decode_policy "$pol"
  tar -C "$OUT" -czf "$OUT/results.tgz" r parts 2>/dev/null
done
el done
tar -C "$OUT" -czf "$OUT/results.tgz" r parts 2>/dev/null
cat "$S"
