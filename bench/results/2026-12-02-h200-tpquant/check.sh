#!/usr/bin/env bash
# tpquant helper's one device call: the CUDA TP device tests (with the new quantized / FP8 KV
# cases of cuda_tp_quant_test.cc) and the one-GPU quantized backend tests.
set -u
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S=$OUT/summary.txt; T=$OUT/device_tests.log
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "revision $(cat $B/REVISION)"; date -u; } > "$S" 2>&1
for tl in cuda_tp_device_test:150 quantized_backend_device_test:60; do
  IFS=: read -r t c <<< "$tl"
  echo "=== $t" >> "$T"
  start=$(date +%s)
  timeout "$c" "$R" "$t" >> "$T" 2>&1
  echo "rc=$? $t ($(( $(date +%s) - start ))s)" | tee -a "$T" >> "$S"
done
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|\[tp quant\]|\[tp fp8 kv\]" "$T" >> "$S"
