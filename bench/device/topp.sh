#!/usr/bin/env bash
# helper topp's one device call: the sampler device test, then base/new e2e alternating.
set -u
B=/tmp/pkv/topp; R=$B/run
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
round() {
  e2e base_t1_$1 pkv-bench-base --temperature 1
  e2e new_t1_$1 pkv-bench --temperature 1
  e2e base_p09_$1 pkv-bench-base --temperature 1 --top_p 0.9
  e2e new_p09_$1 pkv-bench --temperature 1 --top_p 0.9
  e2e base_k50_$1 pkv-bench-base --temperature 1 --top_k 50
  e2e new_k50_$1 pkv-bench --temperature 1 --top_k 50
}
el "1. e2e round 1"; round 1; pack
el "2. device test"
timeout 75 "$R" sampling_kernel_device_test > "$RD/device_test.log" 2>&1
echo "rc=$? sampling_kernel_device_test" >> "$S"
grep -E "candidate path|^\[  (PASSED|FAILED) |tests ran|^\[       OK|^\[  FAILED" "$RD/device_test.log" | head -30 >> "$S"
grep -E -A3 "Failure" "$RD/device_test.log" | head -40 >> "$S"
pack
el "3. e2e round 2"; round 2
e2e base_combo_2 pkv-bench-base --temperature 1 --top_k 40 --top_p 0.95 --min_p 0.05
e2e new_combo_2 pkv-bench --temperature 1 --top_k 40 --top_p 0.95 --min_p 0.05
el done; pack
