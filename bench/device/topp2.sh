#!/usr/bin/env bash
# helper topp's follow-up (optional, ~60 s warm): the device test of 7b35548 (underflow bin in
# registers), then base / v1 (b665a48) / new alternating on the filtered draws v1 left slowest.
set -u
B=/tmp/pkv/topp2; R=$B/run
OUT=${OUT:-/tmp/out}; RD=$OUT/r; mkdir -p "$RD"; S=$OUT/summary.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C "$OUT" -czf "$OUT/results.tgz" r; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  cat "$B/REVISION"; } > "$S"
e2e() {  # TAG BIN ARGS...
  local tag=$1 bin=$2; shift 2
  timeout 40 "$R" "$bin" e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
    --drift_prompts 0 --shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bimodal-B64 \
    --variants fused+pdl,cublas --out "$RD/e2e_$tag.tsv" "$@" > "$RD/e2e_$tag.log" 2>&1
  echo "rc=$? $tag $*" >> "$S"
  grep -E " step " "$RD/e2e_$tag.log" | sed -E 's/ +/ /g' | cut -c1-100 | sed "s/^/$tag /" >> "$S"
}
el "1. device test"
timeout 75 "$R" sampling_kernel_device_test > "$RD/device_test.log" 2>&1
echo "rc=$? sampling_kernel_device_test" >> "$S"
grep -E "candidate path|^\[  (PASSED|FAILED) |^\[  FAILED" "$RD/device_test.log" | head -20 >> "$S"
grep -E -A3 "Failure" "$RD/device_test.log" | head -40 >> "$S"
pack
el "2. e2e"
for cfg in "combo:--temperature 1 --top_k 40 --top_p 0.95 --min_p 0.05" \
    "minp:--temperature 1 --min_p 0.05" "t1:--temperature 1"; do
  tag=${cfg%%:*}; args=${cfg#*:}
  e2e base_$tag pkv-bench-base $args
  e2e v1_$tag pkv-bench-v1 $args
  e2e new_$tag pkv-bench $args
done
el done; pack
