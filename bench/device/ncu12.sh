#!/usr/bin/env bash
# 2026-12-04 twelfth session: why the FP8 GEMV's fixed cost per launch (NOTES "Twelfth
# session"): ncu on the isolated 8B gate/up (rmsnorm, staged) and down (plain, deep batches) at
# one token, dense and fp8, one launch each after warm-up: warp stall reasons, issue activity,
# pipe use, DRAM throughput, L1 misses in flight. pkv-bench gemv of the merged main (dae040c).
# Call: carry [".device/final12.tar.xz"], `bash bench/device/ncu12.sh` (~2 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack final12
RD=$OUT/r; mkdir -p "$RD"
ncu_env
for shape in "8B gate/up:rmsnorm" "8B down:plain"; do
  IFS=: read -r name input <<< "$shape"
  for fmt in dense fp8; do
    tag="${name#8B }"; tag="${tag%%/*}_$fmt"
    timeout 100 "$NCU" --clock-control none --csv --page raw --kernel-name regex:GemvKernel \
      --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
      --section SchedulerStats --section Occupancy \
      "$B/bin/pkv-bench" gemv --dtype bf16 --iters 20 --tokens 1 --formats $fmt \
      --gemv_shapes "$name" --input $input > "$RD/ncu_$tag.csv" 2> "$RD/ncu_$tag.err"
    echo "rc=$? ncu $tag $(wc -l < "$RD/ncu_$tag.csv") lines" >> "$S"
    pack
  done
done
el done
cat "$S"
