#!/usr/bin/env bash
# GPU-machine calls of the w4tile helper (issue 13: the 4-bit GEMV's per-launch cost and the
# QGemm's row requests), phases in priority order, results re-tarred after each phase:
#   1. pkv-bench gemv: main's binary (pkv-bench-base) beside this branch's. CALL=1 (aaa7552, the
#      layout a run-time plan field): rows vs blocked packed layout (--layout), grid capped at
#      1 / 2 CTAs per SM (--grid_ctas_per_sm), bf16 T = 1, 2, 4, 8, rmsnorm input, fp16.
#      CALL=2 (packed formats always blocked, compile-time addressing): base vs branch, bf16
#      plain / rmsnorm, fp16;
#   2. pkv-bench qgemm, 16..64 tokens: CALL=1 rows vs blocked (--qgemm_variants blocked);
#      CALL=2 base vs branch;
#   3. pkv-bench e2e 8B bf16 vs AWQ (session5_final.sh's invocation), branch and base;
#   4. device tests (gemv_device_test with the blocked cases, quantized_backend_device_test);
#   5. ncu (if installed) of the 8B gate/up int4 GEMV at T = 1, rows vs blocked.
# Bundle: device-bundle .device/w4tile build-sm90/bin/{pkv-bench,gemv_device_test,
#   quantized_backend_device_test}; main's pkv-bench as bin/pkv-bench-base; this script as go.sh.
# Call: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/w4tile.tar.xz && CALL=2 bash /tmp/pkv/w4tile/go.sh
# (call 1 ran PHASES=12345 CALL=1; call 2 PHASES=1234, E2E_ORDER="pkv-bench pkv-bench-base pkv-bench
# pkv-bench-base"). Binaries from aaa7552 (call 1: --layout, --qgemm_variants blocked exist only
# there) and dd946ca (call 2); the branch's final revision has main's kernels (the layout is
# bench/results/2026-12-03-h200-w4tile/blocked-dd946ca.patch).
set -u
B=/tmp/pkv/w4tile; R=$B/run
RES=/tmp/res; mkdir -p $RES/gemv $RES/qgemm $RES/e2e $RES/tests $RES/ncu
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "revision $(cat $B/REVISION); ncu: $(which ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo none)"; } > "$S"
PHASES=${PHASES:-12345}

g() {  # TAG BIN ARGS...: one gemv run; chain column of int4 cells into the summary
  local tag=$1 bin=$2; shift 2
  timeout 60 "$R" $bin gemv --iters 100 "$@" --out $RES/gemv/$tag.tsv > $RES/gemv/$tag.md 2>&1
  echo "rc=$? gemv $tag" >> "$S"
}
if [[ $PHASES == *1* && ${CALL:-2} == 1 ]]; then  # call 1 (aaa7552: layout chosen at run time)
  el "1. gemv"
  G="--dtype bf16"
  g base pkv-bench-base $G
  g rows pkv-bench $G
  g blocked pkv-bench $G --layout blocked
  g blocked_g2 pkv-bench $G --layout blocked --grid_ctas_per_sm 2
  g rows_g2 pkv-bench $G --grid_ctas_per_sm 2
  g blocked_g1 pkv-bench $G --layout blocked --grid_ctas_per_sm 1 --tokens 1,8
  g rms_rows pkv-bench $G --input rmsnorm --formats int4,fp8
  g rms_blocked pkv-bench $G --input rmsnorm --formats int4,fp8 --layout blocked
  g rms_blocked_g2 pkv-bench $G --input rmsnorm --formats int4,fp8 --layout blocked --grid_ctas_per_sm 2
  g fp16_rows pkv-bench --dtype fp16 --tokens 1,8 --formats int4,fp8
  g fp16_blocked pkv-bench --dtype fp16 --tokens 1,8 --formats int4,fp8 --layout blocked
  pack
fi
if [[ $PHASES == *1* && ${CALL:-2} == 2 ]]; then  # call 2: packed formats always blocked
  el "1. gemv, base (main) vs blocked"
  for bin in pkv-bench-base pkv-bench; do
    g ${bin}_bf16 $bin --dtype bf16
    g ${bin}_rms $bin --dtype bf16 --input rmsnorm --formats int4,fp8
    g ${bin}_fp16 $bin --dtype fp16 --tokens 1,8 --formats int4,fp8
  done
  pack
fi
if [[ $PHASES == *2* ]]; then
  el "2. qgemm"
  if [ "${CALL:-2}" = 1 ]; then
    timeout 90 "$R" pkv-bench qgemm --qgemm_tokens 16,32,64 --iters 10 --qgemm_variants blocked \
      --out $RES/qgemm/qgemm.tsv > $RES/qgemm/qgemm.md 2>&1
    echo "rc=$? qgemm" >> "$S"
  else
    for bin in pkv-bench-base pkv-bench; do
      timeout 60 "$R" $bin qgemm --qgemm_tokens 16,32,64 --iters 10 \
        --out $RES/qgemm/$bin.tsv > $RES/qgemm/$bin.md 2>&1
      echo "rc=$? qgemm $bin" >> "$S"
    done
  fi
  pack
fi
if [[ $PHASES == *3* ]]; then
  el "3. e2e"
  for bin in ${E2E_ORDER:-pkv-bench pkv-bench-base}; do
    timeout 150 "$R" $bin e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
      --decode_lines bucketed-B1-N4096,uniform-B8,bimodal-B64 --variants cublas,fused+pdl \
      --prompts "" --quant awq --drift_prompts 0 \
      --out $RES/e2e/$bin.$SECONDS.tsv > $RES/e2e/$bin.$SECONDS.log 2>&1
    echo "rc=$? e2e $bin" >> "$S"
    grep -E "step  " $(ls -t $RES/e2e/$bin.*.log | head -1) | sed -E 's/ +/ /g' | cut -c1-150 >> "$S"
    pack
  done
fi
if [[ $PHASES == *4* ]]; then
  el "4. device tests"
  timeout 170 "$R" gemv_device_test --gtest_brief=1 > $RES/tests/gemv.txt 2>&1 &
  p1=$!
  timeout 150 "$R" quantized_backend_device_test --gtest_brief=1 > $RES/tests/qbackend.txt 2>&1 &
  p2=$!
  wait $p1; echo "rc=$? gemv_device_test" >> "$S"
  wait $p2; echo "rc=$? quantized_backend_device_test" >> "$S"
  grep -hE "^\[  (PASSED|FAILED) |tests ran" $RES/tests/*.txt >> "$S"
  pack
fi
if [[ $PHASES == *5* ]]; then
  NCU=$(which ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  if [ -n "$NCU" ]; then
    el "5. ncu"
    for l in rows blocked; do
      timeout 90 "$NCU" --kernel-name-base demangled -k regex:GemvKernel --launch-skip 5 \
        --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section LaunchStats --section Occupancy \
        "$R" pkv-bench gemv --gemv_shapes "8B gate/up" --formats int4 --tokens 1 --iters 3 \
        --layout $l > $RES/ncu/gateup_int4_$l.txt 2>&1
      echo "rc=$? ncu $l" >> "$S"; pack
    done
  fi
fi
el done; pack; cat "$S"
