#!/usr/bin/env bash
# One device call of the quantized-GEMV speed work (issue 13): the GEMV device tests, then
# `pkv-bench gemv` (bf16 tokens 1, 2, 4, 8; fp16 1, 8) with this revision's kernels, the same bench
# with the baseline binary (pkv-bench-old, when bundled) and one ncu profile of the 8B qkv 4-bit
# kernel of each (PKV_NCU=0 skips it; ncu prints at process exit, so keep its timeout generous).
# The bundle carries this script:
#   /work/shared/tools/device-bundle .device/w4speed build/bin/gemv_device_test build/bin/pkv-bench
#   cp OLD_BUILD/bin/pkv-bench .device/w4speed/bin/pkv-bench-old   # optional baseline
#   cp bench/gemv/device_run.sh .device/w4speed/; git rev-parse HEAD > .device/w4speed/REVISION
#   tar -C .device -cJf .device/w4speed.tar.xz w4speed
# and on the GPU machine, from the checkout the tarball was carried into:
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/w4speed.tar.xz && /tmp/pkv/w4speed/device_run.sh
# Writes tests.txt, gemv_*.tsv / .md, ncu_*.txt and log.txt under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$OUT/log.txt
{
  echo "== $(date -u +%FT%TZ) revision $(cat $B/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv
} >> "$L" 2>&1
timeout 200 "$R" gemv_device_test --gtest_brief=1 > "$OUT/tests.txt" 2>&1
echo "== gemv_device_test rc $?" >> "$L"
tail -3 "$OUT/tests.txt"
timeout 90 "$R" pkv-bench gemv --dtype bf16 --iters 100 --out "$OUT/gemv_bf16.tsv" \
  > "$OUT/gemv_bf16.md" 2>&1
echo "== bench bf16 rc $?" >> "$L"
timeout 60 "$R" pkv-bench gemv --dtype fp16 --tokens 1,8 --iters 100 --out "$OUT/gemv_fp16.tsv" \
  > "$OUT/gemv_fp16.md" 2>&1
echo "== bench fp16 rc $?" >> "$L"
if [ -x "$B/bin/pkv-bench-old" ]; then
  timeout 60 "$R" pkv-bench-old gemv --dtype bf16 --tokens 1,8 --iters 100 \
    --out "$OUT/gemv_bf16_old.tsv" > "$OUT/gemv_bf16_old.md" 2>&1
  echo "== bench bf16 old rc $?" >> "$L"
fi
if [ "${PKV_NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
  for b in pkv-bench pkv-bench-old; do
    [ -x "$B/bin/$b" ] || continue
    timeout 90 ncu --clock-control none --kernel-name-base demangled -k regex:Int4Weights \
      --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
      --section WarpStateStats --section MemoryWorkloadAnalysis \
      "$R" "$b" gemv --dtype bf16 --tokens 1 --iters 3 > "$OUT/ncu_$b.txt" 2>&1
    echo "== ncu $b rc $?" >> "$L"
  done
fi
cat "$L"
cat "$OUT/gemv_bf16.md"
