#!/usr/bin/env bash
# Decode attention in the PDL chain, second call (2026-12-03 ninth session): without the early
# PdlTrigger (the first call's fused steps were 36% slower with it). Bundles (build-sm90):
#   .device/next9.tar.xz     main 9804647 (base)
#   .device/attnpdl2.tar.xz  pkv-bench (attention PDL in both paths), pkv-bench-fo (fused path
#     only), the decode/backend device tests of the first binary
# Call: carry [".device/next9.tar.xz", ".device/attnpdl2.tar.xz"], `bash bench/device/attnpdl2.sh`.
set -u
source "$(dirname "$0")/common.sh"
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/next9.tar.xz
BASE=/tmp/pkv/next9/run
unpack attnpdl2
A=$OUT/r; mkdir -p "$A"
pack() { tar -C "$OUT" -czf "$OUT/results.tgz" r; }
el "attnpdl2 ($(cat $B/REVISION)) vs base $(cat /tmp/pkv/next9/REVISION)"
t() {  # TEST SECONDS
  timeout "$2" "$R" "$1" --gtest_brief=1 > "$A/$1.txt" 2>&1
  echo "rc=$? $1 $(grep -hE '^\[  (PASSED|FAILED) ' "$A/$1.txt" | tr '\n' ' ')" >> "$S"
}
t cuda_backend_device_test 300 &
t decode_attention_device_test 300 &
t decode_fp8_device_test 300 &
wait; pack
e2e() {  # BIN TAG ARGS...
  local bin=$1 tag=$2; shift 2
  local run=$R; [ "$bin" = base ] && { run=$BASE; bin=pkv-bench; }
  timeout 150 "$run" "$bin" e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
    --drift_prompts 0 --out "$A/e2e_$tag.tsv" "$@" > "$A/e2e_$tag.log" 2>&1
  echo "rc=$? e2e $tag" >> "$S"
  grep -E " step " "$A/e2e_$tag.log" | sed -E 's/ +/ /g' | cut -c1-100 | sed "s/^/$tag /" >> "$S"
}
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64
   --variants fused+pdl,pdl,cublas --temperature 1)
for i in 1 2; do
  e2e base base$i "${L[@]}"; e2e pkv-bench v2_$i "${L[@]}"; e2e pkv-bench-fo fo_$i "${L[@]}"; pack
done
Q=(--shapes llama3-8b --decode_lines bucketed-B1-N4096 --variants fused+pdl --temperature 1)
for x in base pkv-bench; do
  e2e $x ${x}_fp8kv "${Q[@]}" --kv_cache_dtype fp8_e4m3
  e2e $x ${x}_awq "${Q[@]}" --quant awq
done
el done
pack
cat "$S"
