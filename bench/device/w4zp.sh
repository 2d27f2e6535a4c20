#!/usr/bin/env bash
# GPU-machine call of the w4zp helper (issue 13: the 4-bit GEMV's zero point folded out of the
# inner loop), phases in priority order, results re-tarred after each phase:
#   1. pkv-bench gemv, 8B shapes, T = 1, 2, 8, dense + int4 (plain input) and int4 (rmsnorm
#      input), bf16: main's binary (pkv-bench-base) beside this branch's (pkv-bench, the fold
#      with IMAD.HI shifts) and pkv-bench-v2 (the fold with plain SHF shifts,
#      PKV_W4ZP_IMAD_SHIFT 0); base and branch twice, alternating;
#   2. pkv-bench e2e 8B bf16 vs AWQ (w4reg.sh's invocation: B=1 4k, B=8, bimodal B=64, cublas
#      and fused+pdl): branch, base, branch, base, v2;
#   3. device tests of the branch's build (gemv_device_test, quantized_backend_device_test);
#   4. ncu of the 8B gate/up and down GEMVs at T = 1, int4, base vs branch, with the pipe
#      utilization (ComputeWorkloadAnalysis: is the ALU pipe the next bound?).
# ~230 s on a warm machine (w4reg's call, the same phases less the pipe metrics: 201 s).
# The kernel change is not on main: branch w4zp, or `git apply
#   bench/results/2026-12-03-h200-w4reg/zp_fold.patch` on main (it applies to f2243f0's kernels).
# Bundle (on the build box, in the branch's worktree, sm_90a build dir build-sm90; binaries
# copied aside after each build):
#   ninja -C build-sm90 pkv-bench gemv_device_test quantized_backend_device_test   (v1 = HEAD)
#   v2: "#define PKV_W4ZP_IMAD_SHIFT 0" in kernels/model/gemv_weights.cuh, ninja pkv-bench,
#       copy as pkv-bench-v2, git checkout the file
#   base: git checkout f2243f0 -- kernels tests, ninja pkv-bench, copy as pkv-bench-base,
#       git checkout HEAD -- kernels tests
#   /work/shared/tools/device-bundle /work/main/.device/w4zp pkv-bench pkv-bench-v2 \
#     pkv-bench-base gemv_device_test quantized_backend_device_test
#   strip /work/main/.device/w4zp/bin/*; echo "REVISIONS" > /work/main/.device/w4zp/REVISION
#   cp bench/device/w4zp.sh /work/main/.device/w4zp/go.sh
#   cd /work/main/.device && XZ_OPT="-9 -T2" tar -cJf w4zp.tar.xz w4zp      (4 MB)
# Call (carry [".device/w4zp.tar.xz"]):
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/w4zp.tar.xz && bash /tmp/pkv/w4zp/go.sh
set -u
B=/tmp/pkv/w4zp; R=$B/run
RES=/tmp/res; mkdir -p $RES/gemv $RES/e2e $RES/tests $RES/ncu
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "revision $(cat $B/REVISION)"; } > "$S"
PHASES=${PHASES:-1234}
g() {  # TAG BIN ARGS...: one gemv run
  local tag=$1 bin=$2; shift 2
  timeout 60 "$R" $bin gemv --iters 100 --dtype bf16 --gemv_shapes 8B --tokens 1,2,8 "$@" \
    --out $RES/gemv/$tag.tsv > $RES/gemv/$tag.md 2>&1
  echo "rc=$? gemv $tag" >> "$S"
}
if [[ $PHASES == *1* ]]; then
  el "1. gemv"
  for rep in 1 2; do
    for bin in pkv-bench-base pkv-bench pkv-bench-v2; do
      [ $rep = 2 ] && [ $bin = pkv-bench-v2 ] && continue
      g ${bin}_plain_$rep $bin --formats dense,int4
      g ${bin}_rms_$rep $bin --formats int4 --input rmsnorm
    done
  done
  for f in $RES/gemv/*_1.tsv; do  # shape/tokens/format chain_us, one line per file
    echo "$(basename $f .tsv): $(awk -F'\t' 'NR>1{printf "%s/%s/%s %s  ", $1, $4, $5, $13}' $f)" >> "$S"
  done
  pack
fi
if [[ $PHASES == *2* ]]; then
  el "2. e2e"
  for bin in pkv-bench pkv-bench-base pkv-bench pkv-bench-base pkv-bench-v2; do
    timeout 60 "$R" $bin e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
      --decode_lines bucketed-B1-N4096,uniform-B8,bimodal-B64 --variants cublas,fused+pdl \
      --prompts "" --quant awq --drift_prompts 0 \
      --out $RES/e2e/$bin.$SECONDS.tsv > $RES/e2e/$bin.$SECONDS.log 2>&1
    echo "rc=$? e2e $bin" >> "$S"
    grep -E "step  " $(ls -t $RES/e2e/$bin.*.log | head -1) | grep -E 'fused|bimodal|cublas' |
      sed -E 's/ +/ /g; s/ graphs=1//; s/ tok\/s.*//' >> "$S"
    pack
  done
fi
if [[ $PHASES == *3* ]]; then
  el "3. device tests (branch)"
  timeout 150 "$R" gemv_device_test --gtest_brief=1 > $RES/tests/gemv.txt 2>&1 &
  p1=$!
  timeout 150 "$R" quantized_backend_device_test --gtest_brief=1 > $RES/tests/qbackend.txt 2>&1 &
  p2=$!
  wait $p1; echo "rc=$? gemv_device_test" >> "$S"
  wait $p2; echo "rc=$? quantized_backend_device_test" >> "$S"
  grep -hE "^\[  (PASSED|FAILED) |tests ran|Failure|got .* ref" $RES/tests/*.txt | head -20 >> "$S"
  pack
fi
if [[ $PHASES == *4* ]]; then
  NCU=$(which ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  if [ -n "$NCU" ]; then
    el "4. ncu"
    n() {  # TAG BIN SHAPE
      timeout 40 "$NCU" --kernel-name-base demangled -k regex:GemvKernel --launch-skip 5 \
        --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis \
        --section Occupancy \
        "$R" $2 gemv --gemv_shapes "$3" --formats int4 --tokens 1 --iters 3 > $RES/ncu/$1.txt 2>&1
      echo "rc=$? ncu $1" >> "$S"
      # Per-pipe issue share (a separate call: an unknown metric name fails only this one).
      timeout 40 "$NCU" --kernel-name-base demangled -k regex:GemvKernel --launch-skip 5 \
        --launch-count 1 --metrics $PIPES \
        "$R" $2 gemv --gemv_shapes "$3" --formats int4 --tokens 1 --iters 3 > $RES/ncu/$1.pipes.txt 2>&1
      echo "rc=$? ncu pipes $1" >> "$S"
      grep -E "pipe|inst_executed.sum" $RES/ncu/$1.pipes.txt | sed -E 's/ +/ /g' >> "$S"; pack
    }
    PIPES=sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
    PIPES=$PIPES,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
    PIPES=$PIPES,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active
    PIPES=$PIPES,sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active
    PIPES=$PIPES,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
    PIPES=$PIPES,smsp__inst_executed.sum
    n gateup_int4_base pkv-bench-base "8B gate/up"
    n gateup_int4_zp pkv-bench "8B gate/up"
    n down_int4_base pkv-bench-base "8B down"
    n down_int4_zp pkv-bench "8B down"
  fi
fi
el done; pack; cat "$S"
