#!/usr/bin/env bash
# GPU-machine call of the w4reg helper (issue 13: the 4-bit GEMV at B=1), phases in priority
# order, results re-tarred after each phase:
#   1. pkv-bench gemv, 8B shapes, T = 1, 2, 8, dense + int4 (plain input) and int4 (rmsnorm
#      input): main's binary (pkv-bench-base, cef2f68) beside this branch's variants, base and v1
#      twice (alternating): v1 = pkv-bench (no divides per item, x by step offset, 4-bit batches
#      refilled by halves), v2 = v1 without the refill, v3 = v1 with the 4-bit kernels at
#      2 CTAs/SM (128 registers);
#   2. pkv-bench e2e 8B bf16 vs AWQ (w4tile.sh's invocation): v1, base, v1, base, v3, v2;
#   3. device tests of v1 (gemv_device_test, quantized_backend_device_test);
#   4. ncu of the 8B gate/up and down GEMVs at T = 1: int4 base / v1, dense base.
# Bundle: device-bundle .device/w4reg with bin/{pkv-bench, pkv-bench-base, pkv-bench-v2,
#   pkv-bench-v3, gemv_device_test, quantized_backend_device_test}; this script as go.sh.
# Call: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/w4reg.tar.xz && bash /tmp/pkv/w4reg/go.sh
set -u
B=/tmp/pkv/w4reg; R=$B/run
RES=/tmp/res; mkdir -p $RES/gemv $RES/e2e $RES/tests $RES/ncu
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "revision $(cat $B/REVISION)"; } > "$S"
PHASES=${PHASES:-1234}
g() {  # TAG BIN ARGS...: one gemv run; int4 chain cells into the summary
  local tag=$1 bin=$2; shift 2
  timeout 60 "$R" $bin gemv --iters 100 --dtype bf16 --gemv_shapes 8B --tokens 1,2,8 "$@" \
    --out $RES/gemv/$tag.tsv > $RES/gemv/$tag.md 2>&1
  echo "rc=$? gemv $tag" >> "$S"
}
if [[ $PHASES == *1* ]]; then
  el "1. gemv"
  for rep in 1 2; do
    for bin in pkv-bench-base pkv-bench pkv-bench-v2 pkv-bench-v3; do
      [ $rep = 2 ] && [[ $bin == *-v* ]] && continue
      g ${bin}_plain_$rep $bin --formats dense,int4
      g ${bin}_rms_$rep $bin --formats int4 --input rmsnorm
    done
  done
  for f in $RES/gemv/*_1.tsv; do  # shape tokens format chain_us, one line per file
    echo "$(basename $f .tsv): $(awk -F'\t' 'NR>1{printf "%s/%s/%s %s  ", $1, $4, $5, $13}' $f)" >> "$S"
  done
  pack
fi
if [[ $PHASES == *2* ]]; then
  el "2. e2e"
  for bin in pkv-bench pkv-bench-base pkv-bench pkv-bench-base pkv-bench-v3 pkv-bench-v2; do
    timeout 60 "$R" $bin e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
      --decode_lines bucketed-B1-N4096,uniform-B8,bimodal-B64 --variants cublas,fused+pdl \
      --prompts "" --quant awq --drift_prompts 0 \
      --out $RES/e2e/$bin.$SECONDS.tsv > $RES/e2e/$bin.$SECONDS.log 2>&1
    echo "rc=$? e2e $bin" >> "$S"
    grep -E "step  " $(ls -t $RES/e2e/$bin.*.log | head -1) | grep -E 'fused|bimodal' |
      sed -E 's/ +/ /g; s/ graphs=1//; s/ tok\/s.*//' >> "$S"
    pack
  done
fi
if [[ $PHASES == *3* ]]; then
  el "3. device tests (v1)"
  timeout 150 "$R" gemv_device_test --gtest_brief=1 > $RES/tests/gemv.txt 2>&1 &
  p1=$!
  timeout 150 "$R" quantized_backend_device_test --gtest_brief=1 > $RES/tests/qbackend.txt 2>&1 &
  p2=$!
  wait $p1; echo "rc=$? gemv_device_test" >> "$S"
  wait $p2; echo "rc=$? quantized_backend_device_test" >> "$S"
  grep -hE "^\[  (PASSED|FAILED) |tests ran" $RES/tests/*.txt >> "$S"
  pack
fi
if [[ $PHASES == *4* ]]; then
  NCU=$(which ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  if [ -n "$NCU" ]; then
    el "4. ncu"
    n() {  # TAG BIN SHAPE FORMAT
      timeout 40 "$NCU" --kernel-name-base demangled -k regex:GemvKernel --launch-skip 5 \
        --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section Occupancy \
        --section MemoryWorkloadAnalysis \
        "$R" $2 gemv --gemv_shapes "$3" --formats $4 --tokens 1 --iters 3 > $RES/ncu/$1.txt 2>&1
      echo "rc=$? ncu $1" >> "$S"; pack
    }
    n gateup_int4_base pkv-bench-base "8B gate/up" int4
    n gateup_int4_v1 pkv-bench "8B gate/up" int4
    n down_int4_base pkv-bench-base "8B down" int4
    n down_int4_v1 pkv-bench "8B down" int4
    n gateup_dense_base pkv-bench-base "8B gate/up" dense
  fi
fi
el done; pack; cat "$S"
