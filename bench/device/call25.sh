#!/usr/bin/env bash
# The twenty-third session's last call: the bulk GEMV's auto default (CudaBackendOptions::
# fused_gemv_bulk = kFusedBulkAuto: gate/up and down when hidden >= 4096) against none, e2e at
# B=1 and B=8 for 8B and 1B in two orders, and the whole cuda_backend device test (every model
# case; llama-wide beside its controls).
# Bundle: bash bench/device/bundle.sh auto cuda_backend_device_test pkv-bench
# Call: carry [".device/auto.tar.xz"], `bash bench/device/call25.sh` (~2 min).
set -u
source "$(dirname "$0")/common.sh"
start_call auto
D=$RD/auto; mkdir -p "$D"
P=fused+pdl+prenorm
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
summ() { awk -F'\t' -v t=$1 '$2=="decode" {printf "%s %s B=%s %s %.4f %.4f\n", t, $1, $4, $6, $9, $15}' "$D/e2e_$1.tsv" >> "$S"; }
for run in "ab1|$P+overlap,$P+bulk:none+overlap" "ab2|$P+bulk:none+overlap,$P+overlap"; do
  IFS="|" read -r tag vs <<< "$run"
  time_for 40 "e2e $tag" && { e2e_line "$R" pkv-bench $tag "$D" "${L[@]}" --variants "$vs"; summ $tag; pack; }
done
time_for 150 "tests" && RD=$D device_tests cuda_backend_device_test:140
pack
el done
cat "$S"
