#!/usr/bin/env bash
# The twenty-fourth session's test of the late attention trigger (issue 14): decode attention
# lets the o projection launch once each CTA's K/V tiles are consumed (CudaBackendOptions::
# attention_trigger_after_tiles, e2e suffix "+ltrig"), instead of at its last CTA's exit. call28's
# timeline showed that boundary at ~1.3 us from the last attention exit to the o GEMV's first
# CTA plus ~2 us until its last CTA started, every layer (other boundaries: ~0.4 us, ~0.1 us).
# 1. cuda_backend_device_test: the two _ltrig model cases and their controls (CPU oracle).
# 2. e2e A/B, 8B and 1B at B=1 and B=8, two orders.
# 3. timelines (pkv-bench-tl) of 8B and 1B B=1 with and without it.
# Bundle: bash bench/device/bundle.sh tl pkv-bench cuda_backend_device_test --variant "tl:-DPKV_TIMELINE=ON"
# Call: carry [".device/tl.tar.xz"], `bash bench/device/call29.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
start_call tl
el "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
D=$RD/lt; mkdir -p "$D/timeline"
time_for 100 "tests" && RD=$D device_tests \
  "cuda_backend_device_test:90:*llama_d64_bf16_auto_fused_pdl_w8*:*llama_wide_f16*"
P=fused+pdl+prenorm
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
summ() { awk -F'\t' -v t=$1 '$2=="decode" {printf "%s %s B=%s %s %.4f %.4f\n", t, $1, $4, $6, $9, $15}' "$D/e2e_$1.tsv" >> "$S"; }
for run in "ab1|$P+overlap,$P+ltrig+overlap" "ab2|$P+ltrig+overlap,$P+overlap"; do
  IFS="|" read -r tag vs <<< "$run"
  time_for 40 "e2e $tag" && { e2e_line "$R" pkv-bench $tag "$D" "${L[@]}" --variants "$vs"; summ $tag; pack; }
done
time_for 40 "timeline" && {
  e2e_line "$R" pkv-bench-tl tl "$D" --shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096 \
    --variants "$P+overlap,$P+ltrig+overlap" --timeline_dir "$D/timeline"; summ tl; }
for f in "$D"/timeline/*.tsv; do
  [ -f "$f" ] || continue
  python3 bench/e2e/timeline_report.py "$f" > "${f%.tsv}.txt" 2>&1
  { echo "== $(basename "$f")"; cat "${f%.tsv}.txt"; } >> "$S"
  python3 bench/e2e/timeline_report.py --all "$f" > "${f%.tsv}_all.txt" 2>&1
done
pack
el done
cat "$S"
