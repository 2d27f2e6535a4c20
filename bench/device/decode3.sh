#!/usr/bin/env bash
# GPU-machine call of helper decode3 (issues 14 and 16, 2026-12-03): the decode kernel's prologue
# fills the whole ring (all `stages` tiles in flight before the first wait), graph-sized grids
# request only a CTA's first item with the count, and planner changes (bench/NOTES.md, decode3).
#   1. device tests (this branch): decode_attention_device_test, decode_fp8_device_test;
#   2. whether ncu / nsys exist; if ncu does, a one-tile cell profiled (kernel duration);
#   3. held-out grid, main's pkv-bench (pkv-bench-base) beside this branch's: 16-bit w4s3 and FP8
#      e4m3 (w4s3, w8s3, auto);
#   4. calibration grid, FP8 w4s3 and w8s3 (this branch): refit of ChooseKernelConfig's constants;
#   5. diagnostics (decodefix_diag*.tsv): both binaries, small cells split vs unsplit.
# Build machine: device-bundle into .device/decode3 (pkv-bench and the two tests of this branch,
# main's pkv-bench as bin/pkv-bench-base, this script as go.sh, the two diagnostic traces), strip,
# tar+xz. Device call: carry [".device/decode3.tar.xz"],
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/decode3.tar.xz && bash /tmp/pkv/decode3/go.sh [final]
set -u
B=/tmp/pkv/decode3; R=$B/run; OUT=${OUT:-/tmp/out}; RES=/tmp/res; mkdir -p "$RES" "$OUT"
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
finish() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
trap 'el "terminated"; finish; exit 1' TERM
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; date -u; } > "$S" 2>&1
H=bench/traces/heldout-20260623.tsv; C=bench/traces/calibration-20260622.tsv
bench() {  # bench TAG BINARY TRACE FLAGS...
  local tag=$1 bin=$2 t=$3; shift 3
  timeout 100 "$R" "$bin" kernels --trace "$t" --routes workqueue,persistent,split --iters 30 \
    --wall_iters 3 "$@" --out "$RES/$tag.tsv" > "$RES/$tag.md" 2>&1
  echo "rc=$? $tag" >> "$S"
}

el "device tests"
for t in decode_attention_device_test:80 decode_fp8_device_test:50; do
  IFS=: read -r name secs <<< "$t"
  echo "=== $name" >> "$RES/tests.log"
  timeout "$secs" "$R" "$name" --gtest_brief=1 >> "$RES/tests.log" 2>&1
  echo "rc=$? $name" >> "$S"
done
grep -E "PASSED|FAILED|tests ran" "$RES/tests.log" >> "$S"

el "held-out"
bench base_h16 pkv-bench-base $H --kv_dtype auto --configs w4s3
bench new_h16 pkv-bench $H --kv_dtype auto --configs w4s3
bench base_h8 pkv-bench-base $H --kv_dtype fp8_e4m3 --configs w4s3,w8s3,auto --nofloor
bench new_h8 pkv-bench $H --kv_dtype fp8_e4m3 --configs w4s3,w8s3,auto --nofloor
# The call (binary c686da5) also ran the workqueue route with --tail_frac 0.1 and 0.2, 16-bit
# w4s3 and FP8 w4s3/w8s3 (new_h16_tail*, new_h8_tail*): the option was removed after it.

MODE=${1:-all}  # all | final (tests, the held-out grid and the diagnostics: a confirmation call)
if [ "$MODE" != final ]; then
el "calibration (FP8 configs)"
bench new_c8 pkv-bench $C --kv_dtype fp8_e4m3 --configs w4s3,w8s3 --nofloor --nograph

fi

el "diagnostics"
for bin in pkv-bench-base pkv-bench; do
  bench diag_${bin} $bin $B/decodefix_diag.tsv --kv_dtype auto --configs w4s3 --routes workqueue \
    --nofloor
  bench diag2_${bin}_split $bin $B/decodefix_diag2.tsv --kv_dtype auto --configs w4s3 \
    --routes workqueue --nofloor
  bench diag2_${bin}_nosplit $bin $B/decodefix_diag2.tsv --kv_dtype auto --configs w4s3 \
    --routes workqueue --nofloor --min_split 1000000
done

if [ "$MODE" != final ]; then
el "profilers"
{ command -v ncu nsys; ls -d /usr/local/cuda*/bin/ncu /usr/local/cuda*/bin/nsys /opt/nvidia/* \
  2>/dev/null; } > "$RES/profilers.txt" 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  printf 'tiny-B1-N16\tdiag\t1\t16\n' > /tmp/tiny.tsv
  timeout 45 "$NCU" --target-processes all -k regex:DecodeAttention -c 3 --section LaunchStats \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.max \
    "$R" pkv-bench kernels --trace /tmp/tiny.tsv --routes workqueue --configs w4s3 \
    --iters 2 --wall_iters 1 --nograph --nofloor > "$RES/ncu_tiny.txt" 2>&1
  echo "rc=$? ncu" >> "$S"
fi
cat "$RES/profilers.txt" >> "$S"
fi
el done
grep -h "empty-launch\|streaming" "$RES"/base_h16.md "$RES"/new_h16.md >> "$S"
finish
cat "$S"
