#!/usr/bin/env bash
# The twenty-third session's call: which projections gain from the bulk-copy GEMV, and is it
# correct inside the model. call22 on an H100 (results/2026-12-06-h100-call23): gemv bench down
# and o faster, gate/up slower; e2e 8B B=1 flat, 1B B=1 8% slower with gate/up+down; four
# llama-wide _bulk model cases failed their bf16/fp16 bounds by 1.0-2.2x with no control case to
# say whether the model or the kernel was off. So: the llama-wide cases beside their controls
# (worst errors printed), the bulk gemv test at the model's shapes, then the e2e A/B of the
# per-projection sets in two runs in opposite orders.
# Bundle: bash bench/device/bundle.sh bulk2 gemv_device_test cuda_backend_device_test pkv-bench
# Call: carry [".device/bulk2.tar.xz"], `bash bench/device/call23.sh` (~2.5 min).
set -u
source "$(dirname "$0")/common.sh"
start_call bulk2
D=$RD/bulk; mkdir -p "$D"
RD=$D device_tests "gemv_device_test:120:*Bulk*"
# The llama-wide cases in full output: each test's worst errors (TearDown's line) under its name.
timeout 200 "$R" cuda_backend_device_test --gtest_filter='*llama_wide*' > "$D/cb.txt" 2>&1
echo "rc=$? cuda_backend_device_test llama_wide $(grep -E '^\[  (PASSED|FAILED) ' "$D/cb.txt" | tr '\n' ' ')" >> "$S"
awk '/^\[ RUN/ {name=$NF} /^worst rel_l2/ {print name, $0}' "$D/cb.txt" \
  | sed 's/Models\/CudaBackendTest\.//' >> "$S"
A=fused+pdl+prenorm+overlap
V="$A,fused+pdl+prenorm+bulk:o.down+overlap,fused+pdl+prenorm+bulk:o+overlap,fused+pdl+prenorm+bulk+overlap"
Vr="fused+pdl+prenorm+bulk+overlap,fused+pdl+prenorm+bulk:o+overlap,fused+pdl+prenorm+bulk:o.down+overlap,$A"
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
summ() { awk -F'\t' -v t=$1 '$2=="decode" {printf "%s %s %s B=%s %s %.4f %.4f\n", t, $1, $3, $4, $6, $9, $15}' "$D/e2e_$1.tsv" >> "$S"; }
time_for 120 "e2e ab1" && { e2e_line "$R" pkv-bench ab1 "$D" "${L[@]}" --variants "$V"; summ ab1; pack; }
time_for 120 "e2e ab2" && { e2e_line "$R" pkv-bench ab2 "$D" "${L[@]}" --variants "$Vr"; summ ab2; pack; }
pack
el done
cat "$S"
