#!/usr/bin/env bash
# GPU-machine call of helper decode5 (issues 14 and 16, 2026-12-03): the decode kernel's shorter
# per-row address chain (decode5 branch, "v1") and v1 plus decode4's combine unroll ("v2") beside
# main's binary ("base"), in one call.
# Bundle .device/decode5.tar.xz: device-bundle of build-sm90 binaries: pkv-bench (v1),
# pkv-bench-v2, pkv-bench-base (main), the decode device tests of v1 and of v2 (suffix -v2),
# REVISION, this script as go.sh.
# Carry [".device/decode5.tar.xz"]; command:
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/decode5.tar.xz && bash /tmp/pkv/decode5/go.sh
# Steps: held-out grid 16-bit (w4s3) and FP8 (w4s3, w8s3, auto), base and new, two passes in
# alternating order; the decode device tests of the new build; ncu of a one-tile cell and a
# 256 MiB cell for both binaries (time, instructions executed, active cycles); SASS of the
# one-tile kernel if cuobjdump is there (checks decode5_tools' opcode names).
set -u
B=${BUNDLE:-/tmp/pkv/decode5}; R=$B/run
OUT=${OUT:-/tmp/out}; RES=/tmp/res; mkdir -p "$RES" "$OUT"
S=$RES/summary.txt; T0=$(date +%s)
finish() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
# Each step's start is stamped and what is done so far saved under $OUT (a timed-out call keeps it).
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; finish; }
trap 'el "terminated"; finish; exit 1' TERM
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  echo "bundle: $(cat $B/REVISION)"; date -u; } > "$S" 2>&1
H=bench/traces/heldout-20260623.tsv
bench() {  # bench TAG BINARY FLAGS...
  local tag=$1 bin=$2; shift 2
  timeout 60 "$R" "$bin" kernels --trace "$H" --iters 30 --wall_iters 3 "$@" \
    --out "$RES/$tag.tsv" > "$RES/$tag.md" 2>&1
  echo "rc=$? $tag" >> "$S"
}
h16() { bench "$1" "$2" --routes workqueue,persistent,split --kv_dtype auto --configs w4s3; }
h8() {
  bench "$1" "$2" --routes workqueue,persistent,split --kv_dtype fp8_e4m3 \
    --configs w4s3,w8s3,auto --nofloor
}
if [ "${1:-}" = call2 ]; then
  # Second call: v3 (bin/pkv-bench, the page ids back in registers until the copy) beside base.
  el "call2: held-out, pass 1 (base, v3)"
  h16 base_h16_1 pkv-bench-base; h16 v3_h16_1 pkv-bench
  h8 base_h8_1 pkv-bench-base; h8 v3_h8_1 pkv-bench
  el "device tests (v3)"
  for t in decode_attention_device_test decode_fp8_device_test fp8_kv_device_test; do
    ( timeout 150 "$R" "$t" --gtest_brief=1 > "$RES/tests_$t.log" 2>&1; echo "rc=$? $t" >> "$S" ) &
  done
  wait
  grep -E "PASSED|FAILED|tests ran" "$RES"/tests_*.log >> "$S"
  el "call2: held-out, pass 2 (v3, base)"
  h16 v3_h16_2 pkv-bench; h16 base_h16_2 pkv-bench-base
  h8 v3_h8_2 pkv-bench; h8 base_h8_2 pkv-bench-base
  el done
  finish
  cat "$S"
  exit 0
fi
el "held-out, pass 1 (base, v1, v2)"
h16 base_h16_1 pkv-bench-base; h16 v1_h16_1 pkv-bench; h16 v2_h16_1 pkv-bench-v2
h8 base_h8_1 pkv-bench-base; h8 v1_h8_1 pkv-bench; h8 v2_h8_1 pkv-bench-v2
el "held-out, pass 2 (v2, v1, base)"
h16 v2_h16_2 pkv-bench-v2; h16 v1_h16_2 pkv-bench; h16 base_h16_2 pkv-bench-base
h8 v2_h8_2 pkv-bench-v2; h8 v1_h8_2 pkv-bench; h8 base_h8_2 pkv-bench-base

for v in "" -v2; do
  el "device tests${v:- (v1)}"
  for t in decode_attention_device_test decode_fp8_device_test fp8_kv_device_test; do
    ( timeout 150 "$R" "$t$v" --gtest_brief=1 > "$RES/tests_$t$v.log" 2>&1
      echo "rc=$? $t$v" >> "$S" ) &
  done
  wait
done
grep -E "PASSED|FAILED|tests ran" "$RES"/tests_*.log >> "$S"

el "ncu"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ncu_cell() {  # ncu_cell TAG BINARY TRACE_LINE KV CONFIG
  local tag=$1 bin=$2 line=$3 kv=$4 cfg=$5
  printf '%s\n' "$line" > "/tmp/$tag.tsv"
  timeout 60 "$NCU" --target-processes all -k regex:DecodeAttention --launch-skip 2 -c 1 \
    --clock-control none \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.max,smsp__inst_executed.sum,smsp__inst_executed.max,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread \
    "$R" "$bin" kernels --trace "/tmp/$tag.tsv" --routes workqueue --kv_dtype "$kv" \
    --configs "$cfg" --iters 4 --wall_iters 1 --nograph --nofloor > "$RES/ncu_$tag.txt" 2>&1
  echo "rc=$? ncu $tag" >> "$S"
  grep -E "DecodeAttention|gpu__time|inst_executed|cycles_active|cycles_elapsed|dram__|registers" \
    "$RES/ncu_$tag.txt" | sed "s/^/$tag /" >> "$S"
}
if [ -n "$NCU" ]; then
  TINY=$(printf 'tiny-B1-N16\tdiag\t1\t16')
  MID=$(grep -P '^bucketed-B4-N16384\t' $H)
  for b in base v1 v2; do
    bin=pkv-bench; [ $b = base ] && bin=pkv-bench-base; [ $b = v2 ] && bin=pkv-bench-v2
    ncu_cell tiny16_$b $bin "$TINY" auto w4s3
    ncu_cell tiny8_$b $bin "$TINY" fp8_e4m3 w8s3
    ncu_cell mid8_$b $bin "$MID" fp8_e4m3 w4s3
  done
fi
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [ -n "$CUOBJ" ]; then
  for b in pkv-bench pkv-bench-v2 pkv-bench-base; do
    timeout 60 "$CUOBJ" -sass -fun '_ZN3pkv6decode3dev21DecodeAttentionKernelILi128E6__halfS3_EEvNS0_12DecodeParamsE' \
      "$B/bin/$b" > "$RES/sass_$b.txt" 2>&1
    echo "rc=$? cuobjdump $b ($(grep -c '/\*[0-9a-f]\{4\}\*/' "$RES/sass_$b.txt") instructions)" >> "$S"
  done
fi
el done
grep -h "streaming" "$RES"/*.md 2>/dev/null | sort | uniq -c >> "$S"
finish
cat "$S"
