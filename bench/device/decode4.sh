#!/usr/bin/env bash
# GPU-machine calls of helper decode4 (issues 14 and 16, 2026-12-03): where a decode launch's
# fixed cost goes. Call 1 (`go.sh profile`) uses last session's bundle .device/decode3.tar.xz
# (bin/pkv-bench = 11dcb60, main's decode code; bin/pkv-bench-base = e5e5192) plus this folder:
#   1. decode4_probe (bench/device/decode4_probe.cu): queued-launch pieces by CUDA events;
#   2. confirmation of the final planner on the small held-out cells and zipf-B2 (both binaries);
#   3. ncu on a one-tile cell and a 256 MiB cell (warp states, source-level stall sampling).
# Carry [".device/decode3.tar.xz", ".device/decode4"]; command:
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/decode3.tar.xz && bash .device/decode4/go.sh profile
# Call 2 (`go.sh measure`): bundle .device/decode4.tar.xz (device-bundle of this branch's pkv-bench
# and the decode device tests, main's decode code as bin/pkv-bench-base, this script as go.sh,
# the probe): probe again, held-out grid 16-bit and FP8 both binaries, device tests, ncu (new).
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/decode4.tar.xz && bash /tmp/pkv/decode4/go.sh measure
set -u
MODE=${1:-profile}
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/pkv/decode3
[ "$MODE" = measure ] && B=/tmp/pkv/decode4
R=$B/run
OUT=${OUT:-/tmp/out}; RES=/tmp/res; mkdir -p "$RES" "$OUT"
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
finish() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
trap 'el "terminated"; finish; exit 1' TERM
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  echo "bundle: $(cat $B/REVISION)"; date -u; } > "$S" 2>&1
SMALL=$D/small.tsv; H=bench/traces/heldout-20260623.tsv
grep -E '^(zipf-B1|zipf-B2|bucketed-B1-N1024|bucketed-B1-N4096|bucketed-B4-N1024|uniform-B1)	' $H > $SMALL
bench() {  # bench TAG BINARY TRACE FLAGS...
  local tag=$1 bin=$2 t=$3; shift 3
  timeout 60 "$R" "$bin" kernels --trace "$t" --iters 30 --wall_iters 3 "$@" \
    --out "$RES/$tag.tsv" > "$RES/$tag.md" 2>&1
  echo "rc=$? $tag" >> "$S"
}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ncu_cell() {  # ncu_cell TAG TRACE_LINE SKIP COUNT
  local tag=$1 line=$2 skip=$3 count=$4
  printf '%s\n' "$line" > /tmp/$tag.tsv
  timeout 90 "$NCU" --target-processes all -k regex:DecodeAttention --launch-skip "$skip" \
    -c "$count" --clock-control none --import-source yes --warp-sampling-interval 0 \
    --section WarpStateStats --section SourceCounters --section SchedulerStats \
    --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.max,smsp__cycles_active.min \
    -o "$RES/ncu_$tag" -f "$R" pkv-bench kernels --trace /tmp/$tag.tsv --routes workqueue \
    --configs w4s3 --iters 4 --wall_iters 1 --nograph --nofloor > "$RES/ncu_${tag}_log.txt" 2>&1
  echo "rc=$? ncu $tag" >> "$S"
  "$NCU" -i "$RES/ncu_$tag.ncu-rep" --page details --csv > "$RES/ncu_${tag}_details.csv" 2>&1
  "$NCU" -i "$RES/ncu_$tag.ncu-rep" --page source --csv --print-source sass \
    > "$RES/ncu_${tag}_sass.csv" 2>&1
  "$NCU" -i "$RES/ncu_$tag.ncu-rep" --page source --csv --print-source cuda,sass \
    > "$RES/ncu_${tag}_cuda_sass.csv" 2>&1
  "$NCU" -i "$RES/ncu_$tag.ncu-rep" --page details > "$RES/ncu_${tag}_details.txt" 2>&1
  rm -f "$RES/ncu_$tag.ncu-rep"
}

if [ "$MODE" = measure ]; then
el "probe"
timeout 60 "$D/decode4_probe" > "$RES/probe.txt" 2>&1; echo "rc=$? probe" >> "$S"
cat "$RES/probe.txt" >> "$S"
el "held-out: new (this branch) beside base (main's decode code)"
bench base_h16 pkv-bench-base $H --routes workqueue,persistent,split --kv_dtype auto --configs w4s3
bench new_h16 pkv-bench $H --routes workqueue,persistent,split --kv_dtype auto --configs w4s3
bench base_h8 pkv-bench-base $H --routes workqueue,persistent,split --kv_dtype fp8_e4m3 --configs w4s3,w8s3,auto --nofloor
bench new_h8 pkv-bench $H --routes workqueue,persistent,split --kv_dtype fp8_e4m3 --configs w4s3,w8s3,auto --nofloor
el "device tests (new)"
# The three at once (device time is short; they check results, not speed).
for t in decode_attention_device_test decode_fp8_device_test fp8_kv_device_test; do
  ( timeout 100 "$R" "$t" --gtest_brief=1 > "$RES/tests_$t.log" 2>&1; echo "rc=$? $t" >> "$S" ) &
done
wait
grep -E "PASSED|FAILED|tests ran" "$RES"/tests_*.log >> "$S"
el "ncu (new)"
mkdir -p /work/wt; ln -sfn "$PWD" /work/wt/decode4
if [ -n "$NCU" ]; then
  ncu_cell mid "$(grep -P '^bucketed-B4-N16384\t' $H)" 2 1
  ncu_cell tiny "$(printf 'tiny-B1-N16\tdiag\t1\t16')" 2 1
  grep -E "gpu__time_duration|Warp Cycles Per Issued" "$RES"/ncu_*_details.txt >> "$S"
fi
fi

if [ "$MODE" = profile ]; then
el "probe"
timeout 60 "$D/decode4_probe" > "$RES/probe.txt" 2>&1; echo "rc=$? probe" >> "$S"
cat "$RES/probe.txt" >> "$S"

el "confirmation: small held-out cells, final planner (11dcb60) beside e5e5192"
for rep in 1 2; do
  bench base_s16_$rep pkv-bench-base $SMALL --routes workqueue,persistent,split --kv_dtype auto --configs w4s3
  bench new_s16_$rep pkv-bench $SMALL --routes workqueue,persistent,split --kv_dtype auto --configs w4s3
done
bench base_s8 pkv-bench-base $SMALL --routes workqueue,persistent,split --kv_dtype fp8_e4m3 --configs w4s3,w8s3,auto --nofloor
bench new_s8 pkv-bench $SMALL --routes workqueue,persistent,split --kv_dtype fp8_e4m3 --configs w4s3,w8s3,auto --nofloor

el "ncu"
# Sources where the binaries' line info may point (built in /work/wt/decode3 or /work/main).
mkdir -p /work/wt; ln -sfn "$PWD" /work/wt/decode3; [ -e /work/main ] || ln -sfn "$PWD" /work/main
if [ -n "$NCU" ]; then
  "$NCU" --version > "$RES/ncu_version.txt" 2>&1
  ncu_cell tiny "$(printf 'tiny-B1-N16\tdiag\t1\t16')" 2 2
  ncu_cell mid "$(grep -P '^bucketed-B4-N16384\t' $H)" 2 1
  # Warm caches (ncu's flush off): how much of the one-tile kernel is cold misses.
  timeout 60 "$NCU" --target-processes all -k regex:DecodeAttention --launch-skip 2 -c 3 \
    --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.max \
    "$R" pkv-bench kernels --trace /tmp/tiny.tsv --routes workqueue --configs w4s3 --iters 4 \
    --wall_iters 1 --nograph --nofloor > "$RES/ncu_tiny_warm.txt" 2>&1
  echo "rc=$? ncu tiny warm" >> "$S"
  # The probe's kernels under ncu: the GPU-side duration of an empty / 3-load kernel.
  timeout 60 "$NCU" -k regex:'EmptyKernel|EmptySmemKernel|ChainKernel' --launch-skip 6 -c 6 \
    --clock-control none \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.max \
    "$D/decode4_probe" > "$RES/ncu_probe.txt" 2>&1
  echo "rc=$? ncu probe" >> "$S"
  grep -E "DecodeAttention|gpu__time|cycles_active.max|sm__cycles_elapsed" "$RES/ncu_tiny_warm.txt" | head -20 >> "$S"
  grep -E "gpu__time_duration|Stall|Warp Cycles|Issued" "$RES/ncu_tiny_details.txt" | head -40 >> "$S"
fi
fi
el done
grep -h "empty-launch\|streaming" "$RES"/*.md 2>/dev/null | sort | uniq -c >> "$S"
finish
cat "$S"
