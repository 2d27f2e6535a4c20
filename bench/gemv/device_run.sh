#!/usr/bin/env bash
# One device call of the quantized-GEMV work (issue 13 item 2): the GEMV device tests, then
# `pkv-bench gemv` for bf16 (tokens 1, 2, 4, 8) and fp16 (1, 8). The bundle carries this script:
#   /work/shared/tools/device-bundle .device/w4a16 build/bin/gemv_device_test build/bin/pkv-bench
#   cp bench/gemv/device_run.sh .device/w4a16/; git rev-parse HEAD > .device/w4a16/REVISION
#   tar -C .device -cJf .device/w4a16.tar.xz w4a16
# and on the GPU machine, from the checkout the tarball was carried into:
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/w4a16.tar.xz && /tmp/pkv/w4a16/device_run.sh
# Writes tests.txt, gemv_bf16.tsv / .md, gemv_fp16.tsv / .md and log.txt under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$OUT/log.txt
{
  echo "== $(date -u +%FT%TZ) revision $(cat $B/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv
} >> "$L" 2>&1
timeout 300 "$R" gemv_device_test --gtest_brief=1 > "$OUT/tests.txt" 2>&1
echo "== gemv_device_test rc $?" >> "$L"
tail -3 "$OUT/tests.txt"
timeout 120 "$R" pkv-bench gemv --dtype bf16 --out "$OUT/gemv_bf16.tsv" > "$OUT/gemv_bf16.md" 2>&1
echo "== bench bf16 rc $?" >> "$L"
timeout 60 "$R" pkv-bench gemv --dtype fp16 --tokens 1,8 --out "$OUT/gemv_fp16.tsv" \
  > "$OUT/gemv_fp16.md" 2>&1
echo "== bench fp16 rc $?" >> "$L"
cat "$L"
cat "$OUT/gemv_bf16.md"
