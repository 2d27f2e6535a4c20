#!/usr/bin/env bash
# GPU-machine call of helper decodefix (issues 14 and 16, 2026-12-02): where the decode kernel's
# fixed cost per launch goes, the page-id prefix carried in the plan (one dependent round trip
# less per item; graph-sized launches read the item with the count), and FP8 w4s3 vs w8s3 per cell.
#   1. device tests: decode_attention_device_test, decode_fp8_device_test (new binaries);
#   2. held-out grid, main's pkv-bench (pkv-bench-base) and this branch's side by side: 16-bit w4s3,
#      FP8 e4m3 w4s3 and w8s3; this branch without the prefix (--nopage_prefix);
#   3. calibration grid, FP8 w4s3 and w8s3 (this branch): fitting data of the per-cell config rule;
#   4. diagnostics on bench/device/decodefix_diag.tsv: warm L2 (--flush_mb 1) vs flushed; on
#      decodefix_diag2.tsv (small cells): split plans (in-kernel merge) vs no splits.
# (Call 1 also asked for nsys kernel durations: nsys is not installed on the GPU machine.)
# Build machine: device-bundle into .device/decodefix (pkv-bench and the two tests of this branch,
# main's pkv-bench copied in as bin/pkv-bench-base, this script as go.sh, the diagnostic trace),
# strip, tar+xz. Device call: carry [".device/decodefix.tar.xz"],
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/decodefix.tar.xz && timeout 360 bash /tmp/pkv/decodefix/go.sh
set -u
B=/tmp/pkv/decodefix; R=$B/run; OUT=${OUT:-/tmp/out}; RES=/tmp/res; mkdir -p "$RES"
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
finish() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
trap 'el "terminated"; finish; exit 1' TERM
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; date -u; } > "$S" 2>&1
H=bench/traces/heldout-20260623.tsv; C=bench/traces/calibration-20260622.tsv
D=$B/decodefix_diag.tsv
bench() {  # bench TAG BINARY TRACE FLAGS...
  local tag=$1 bin=$2 t=$3; shift 3
  timeout 150 "$R" "$bin" kernels --trace "$t" --routes workqueue,persistent,split --iters 30 \
    --wall_iters 3 "$@" --out "$RES/$tag.tsv" > "$RES/$tag.md" 2>&1
  echo "rc=$? $tag" >> "$S"
}

el "device tests"
for t in decode_attention_device_test:200 decode_fp8_device_test:120; do
  IFS=: read -r name secs <<< "$t"
  echo "=== $name" >> "$RES/tests.log"
  timeout "$secs" "$R" "$name" --gtest_brief=1 >> "$RES/tests.log" 2>&1
  echo "rc=$? $name" >> "$S"
done
grep -E "PASSED|FAILED|tests ran" "$RES/tests.log" >> "$S"

MODE=${1:-all}  # all | final (tests and the held-out grid only: the third call)
el "held-out"
bench base_h16 pkv-bench-base $H --kv_dtype auto --configs w4s3
bench new_h16 pkv-bench $H --kv_dtype auto --configs w4s3
bench base_h8 pkv-bench-base $H --kv_dtype fp8_e4m3 --configs w4s3,w8s3 --nofloor
bench new_h8 pkv-bench $H --kv_dtype fp8_e4m3 --configs w4s3,w8s3,auto --nofloor
[ "$MODE" = final ] || bench new_h16_nopfx pkv-bench $H --kv_dtype auto --configs w4s3 \
  --nopage_prefix --nofloor
if [ "$MODE" = final ]; then el done; finish; cat "$S"; exit 0; fi

el "calibration (FP8 configs)"
bench new_c8 pkv-bench $C --kv_dtype fp8_e4m3 --configs w4s3,w8s3 --nofloor --nograph

el "diagnostics"
for bin in pkv-bench-base pkv-bench; do
  bench diag_${bin}_flushed $bin $D --kv_dtype auto --configs w4s3 --routes workqueue --nofloor
  bench diag_${bin}_warm $bin $D --kv_dtype auto --configs w4s3 --routes workqueue --nofloor \
    --flush_mb 1
done
# Small cells without splits (no merge) against the split plans: the merge path's cost.
D2=$B/decodefix_diag2.tsv
for bin in pkv-bench-base pkv-bench; do
  bench diag2_${bin}_split $bin $D2 --kv_dtype auto --configs w4s3 --routes workqueue --nofloor
  bench diag2_${bin}_nosplit $bin $D2 --kv_dtype auto --configs w4s3 --routes workqueue --nofloor \
    --min_split 1000000
done
el done
grep -h "empty-launch\|streaming" "$RES"/base_h16.md "$RES"/new_h16.md >> "$S"
finish
cat "$S"
