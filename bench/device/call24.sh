#!/usr/bin/env bash
# The twenty-third session's second call: why the bulk GEMV loses inside the 1B chain. call23 on an
# H200 (results/2026-12-06-h200-call23): gate/up+down 8B B=1 -2.7%, 1B B=1 +8..12%; o alone +5%
# (8B) / +21% (1B) although o is the projection the bulk kernel wins most on standalone (H100).
# Hypothesis: the bulk CTAs' ~70 KB of shared memory makes an SM switch its L1/shared carveout
# between the chain's kernels, and an SM switches only when drained: PDL overlap lost at every
# bulk boundary. Test: the same sets (none, gateup, down, gateup+down) with and without
# `--prefer_shared_carveout` (every kernel asks for the largest carveout), two orders each; the
# engine's GEMV standalone on this GPU; the llama-wide model cases at their new weight scale.
# Bundle: bash bench/device/bundle.sh bulk3 cuda_backend_device_test pkv-bench
# Call: carry [".device/bulk3.tar.xz"], `bash bench/device/call24.sh` (~2 min; GEMV=1 adds the
# engine's GEMV standalone, NOTESTS=1 drops the model cases).
set -u
source "$(dirname "$0")/common.sh"
start_call bulk3
D=$RD/bulk; mkdir -p "$D"
[ -z "${NOTESTS:-}" ] && timeout 200 "$R" cuda_backend_device_test --gtest_filter='*llama_wide*' > "$D/cb.txt" 2>&1
echo "rc=$? cuda_backend_device_test llama_wide $(grep -E '^\[  (PASSED|FAILED) ' "$D/cb.txt" | tr '\n' ' ')" >> "$S"
awk '/^\[ RUN/ {name=$NF} /^worst rel_l2/ {print name, $0}' "$D/cb.txt" \
  | sed 's/Models\/CudaBackendTest\.//' | grep -E "Decode64|Chunked|Buckets" >> "$S"
P=fused+pdl+prenorm
V="$P+overlap,$P+bulk:gateup+overlap,$P+bulk:down+overlap,$P+bulk+overlap"
Vr="$P+bulk+overlap,$P+bulk:down+overlap,$P+bulk:gateup+overlap,$P+overlap"
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096)
summ() { awk -F'\t' -v t=$1 '$2=="decode" {printf "%s %s B=%s %s %.4f %.4f\n", t, $1, $4, $6, $9, $15}' "$D/e2e_$1.tsv" >> "$S"; }
for run in "ab1|$V|" "ab2|$Vr|" "cv1|$V|--prefer_shared_carveout" "cv2|$Vr|--prefer_shared_carveout"; do
  IFS="|" read -r tag vs extra <<< "$run"
  time_for 60 "e2e $tag" && { e2e_line "$R" pkv-bench $tag "$D" "${L[@]}" --variants "$vs" $extra; summ $tag; pack; }
done
[ -n "${GEMV:-}" ] && time_for 60 "gemv" && gemv_bulk_ab "$D"
pack
el done
cat "$S"
