#!/usr/bin/env bash
# Second GPU-machine call of the qgemm2 helper, NOT RUN (the session's device time was spent):
# v3 = the branch with bench/results/2026-12-03-h200-qgemm2/v3-d32d93b.patch applied (split
# combine by part, 16 warps at 64-token tiles); v1 = the branch as landed.
#   1. device tests of v3 (gemv_device_test '*QGemm*', quantized_backend_device_test);
#   2. pkv-bench qgemm, 8B shapes, 16/32/64 tokens: v3 (pkv-bench) beside v1 (pkv-bench-v1);
#   3. pkv-bench e2e 8B bf16 vs AWQ (w4reg.sh's invocation): v3.
# Bundle: device-bundle .device/qgemm2b with bin/{pkv-bench, pkv-bench-v1, gemv_device_test,
#   quantized_backend_device_test} (v3's tests); REVISION; this script as go.sh. ~80 s warm.
# Call: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/qgemm2b.tar.xz && bash /tmp/pkv/qgemm2b/go.sh
set -u
B=/tmp/pkv/qgemm2b; R=$B/run
RES=/tmp/res; mkdir -p $RES/qgemm $RES/e2e $RES/tests
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  cat $B/REVISION; } > "$S"
el "1. device tests (v3)"
timeout 60 "$R" gemv_device_test --gtest_brief=1 --gtest_filter='*QGemm*' > $RES/tests/qgemm.txt 2>&1 &
p1=$!
timeout 60 "$R" quantized_backend_device_test --gtest_brief=1 > $RES/tests/qbackend.txt 2>&1 &
p2=$!
wait $p1; echo "rc=$? gemv_device_test *QGemm*" >> "$S"
wait $p2; echo "rc=$? quantized_backend_device_test" >> "$S"
grep -hE "^\[  (PASSED|FAILED) |tests ran|Failure" $RES/tests/*.txt | head -20 >> "$S"
pack
el "2. qgemm"
for t in pkv-bench pkv-bench-v1; do
  timeout 30 "$R" $t qgemm --qgemm_tokens 16,32,64 --iters 10 --out $RES/qgemm/$t.tsv \
    > $RES/qgemm/$t.md 2>&1
  echo "rc=$? qgemm $t" >> "$S"
  awk -F'|' -v t=$t '$5 !~ /=/ && $3+0 > 0 {gsub(/ /,"",$5); printf "%s %s M=%s %s p%s q=%s d=%s b=%s\n", t, $2, $3+0, $4, $5, $6+0, $7+0, $8+0}' \
    $RES/qgemm/$t.md >> "$S"
  pack
done
el "3. e2e"
timeout 40 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
  --decode_lines bucketed-B1-N4096,uniform-B8,bimodal-B64 --variants cublas,fused+pdl \
  --prompts "" --quant awq --drift_prompts 0 --out $RES/e2e/v3.tsv > $RES/e2e/v3.log 2>&1
echo "rc=$? e2e v3" >> "$S"
grep -E "step  " $RES/e2e/v3.log | sed -E 's/ +/ /g; s/ graphs=1//; s/ tok\/s.*//; s/llama3-8b//' >> "$S"
el "done"; pack
