#!/usr/bin/env bash
# GPU-machine call of the qgemm2 helper (issue 13: the quantized-weight GEMM at 16-64 tokens),
# phases in priority order, results re-tarred after each:
#   1. device tests of the new QGemm (gemv_device_test '*QGemm*', quantized_backend_device_test);
#   2. pkv-bench qgemm, 8B shapes, 16/32/64 tokens: main's binary (pkv-bench-base) beside the
#      branch's (pkv-bench, with a split sweep);
#   3. pkv-bench e2e 8B bf16 vs AWQ (w4reg.sh's invocation): new, base, new-route (pkv-bench-r:
#      the QGemm for every projection up to 64 tokens);
#   4. ncu of the first QGemm launch per cell (NVTX range "qgemm"), 8B gate/up and down, 4-bit,
#      16 and 64 tokens, base and new; bf16 cuBLAS (range "dense") on the same cells.
# Bundle: device-bundle .device/qgemm2 with bin/{pkv-bench, pkv-bench-base, pkv-bench-r,
#   gemv_device_test, quantized_backend_device_test}; REVISION; this script as go.sh.
# Call: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/qgemm2.tar.xz && bash /tmp/pkv/qgemm2/go.sh
set -u
B=/tmp/pkv/qgemm2; R=$B/run
RES=/tmp/res; mkdir -p $RES/qgemm $RES/e2e $RES/tests $RES/ncu
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  cat $B/REVISION; } > "$S"
PHASES=${PHASES:-1234}
if [[ $PHASES == *1* ]]; then
  el "1. device tests (new)"
  timeout 120 "$R" gemv_device_test --gtest_brief=1 --gtest_filter='*QGemm*' > $RES/tests/qgemm.txt 2>&1 &
  p1=$!
  timeout 120 "$R" quantized_backend_device_test --gtest_brief=1 > $RES/tests/qbackend.txt 2>&1 &
  p2=$!
  wait $p1; echo "rc=$? gemv_device_test *QGemm*" >> "$S"
  wait $p2; echo "rc=$? quantized_backend_device_test" >> "$S"
  grep -hE "^\[  (PASSED|FAILED) |tests ran|Failure" $RES/tests/*.txt | head -20 >> "$S"
  pack
fi
if [[ $PHASES == *2* ]]; then
  el "2. qgemm"
  timeout 60 "$R" pkv-bench-base qgemm --qgemm_tokens 16,32,64 --iters 10 \
    --out $RES/qgemm/base.tsv > $RES/qgemm/base.md 2>&1
  echo "rc=$? qgemm base" >> "$S"
  timeout 90 "$R" pkv-bench qgemm --qgemm_tokens 16,32,64 --iters 10 --qgemm_parts 1,2,4,8,16 \
    --out $RES/qgemm/new.tsv > $RES/qgemm/new.md 2>&1
  echo "rc=$? qgemm new" >> "$S"
  for t in base new; do  # shape M format parts qgemm dequant bf16 (rule's split only)
    awk -F'|' -v t=$t '$5 !~ /=/ && $3+0 > 0 {gsub(/ /,"",$5); printf "%s %s M=%s %s p%s q=%s d=%s b=%s\n", t, $2, $3+0, $4, $5, $6+0, $7+0, $8+0}' \
      $RES/qgemm/$t.md >> "$S"
  done
  pack
fi
if [[ $PHASES == *3* ]]; then
  el "3. e2e"
  for bin in pkv-bench pkv-bench-base pkv-bench-r; do
    timeout 60 "$R" $bin e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
      --decode_lines bucketed-B1-N4096,uniform-B8,bimodal-B64 --variants cublas,fused+pdl \
      --prompts "" --quant awq --drift_prompts 0 \
      --out $RES/e2e/$bin.$SECONDS.tsv > $RES/e2e/$bin.$SECONDS.log 2>&1
    echo "rc=$? e2e $bin" >> "$S"
    grep -E "step  " $(ls -t $RES/e2e/$bin.*.log | head -1) |
      sed -E 's/ +/ /g; s/ graphs=1//; s/ tok\/s.*//; s/llama3-8b//' >> "$S"
    pack
  done
fi
if [[ $PHASES == *4* ]]; then
  NCU=$(which ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  if [ -n "$NCU" ]; then
    el "4. ncu"
    n() {  # TAG BIN RANGES...
      local tag=$1 bin=$2; shift 2
      local inc=(); for r in "$@"; do inc+=(--nvtx-include "$r/"); done
      timeout 90 "$NCU" --nvtx "${inc[@]}" --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section Occupancy \
        --section LaunchStats --csv --page details --log-file $RES/ncu/$tag.csv \
        "$R" $bin qgemm --qgemm_shapes "8B gate/up,8B down" --qgemm_formats int4 \
        --qgemm_tokens 16,64 --iters 1 > $RES/ncu/$tag.out 2>&1
      echo "rc=$? ncu $tag" >> "$S"; pack
    }
    n base pkv-bench-base qgemm
    n new pkv-bench qgemm dense
  fi
fi
el "done"; pack
