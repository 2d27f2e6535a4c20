#!/usr/bin/env bash
# 2026-12-04 thirteenth session: why the cp.async weight ring streams slower than the register
# batch (cpring2: dense gate/up T=1 plain 59.4 -> 82.5 us with 4-unit chunks in 2 slots). ncu on
# the isolated 8B gate/up, one token, plain input, dense and fp8: main (pkv-bench-base) vs c4s2
# and c2s3. Call: carry [".device/cpring2.tar.xz"], `bash bench/device/ncu13.sh` (~2.5 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack cpring2
RD=$OUT/r; mkdir -p "$RD"
ncu_env
for bin in pkv-bench-base pkv-bench-c4s2 pkv-bench-c2s3; do
  for fmt in dense fp8; do
    tag="${bin#pkv-bench-}_$fmt"
    timeout 100 "$NCU" --clock-control none --csv --page raw --kernel-name regex:GemvKernel \
      --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
      "$B/bin/$bin" gemv --dtype bf16 --iters 20 --tokens 1 --formats $fmt \
      --gemv_shapes "8B gate/up" --input plain > "$RD/ncu_$tag.csv" 2> "$RD/ncu_$tag.err"
    echo "rc=$? ncu $tag $(wc -l < "$RD/ncu_$tag.csv") lines" >> "$S"
    pack
  done
done
el done
cat "$S"
