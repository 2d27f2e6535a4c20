#!/usr/bin/env bash
# GPU-machine call of the 2026-12-02 fourth session, one call (results come back as one tarball:
# the device tool returns at most a few files):
#   1. bench/device/determinism.sh (issue 14's deterministic mode: device test, served check, cost);
#   2. FP8 KV route-policy data (issue 16): pkv-bench kernels with fp8_e4m3 pages on the calibration
#      grid at 132, 66 and 28 SMs (fitting data) and on the held-out grid at 132 and 66 (scoring);
#   3. pkv-bench e2e 8B: bf16 vs FP8 KV, teacher-forced logprob drift over 4 prompts.
# Build machine: the determinism bundle (.device/det, determinism.sh's header) with pkv-bench of
# this revision. Device call: carry [".device/det.tar.xz"], bash bench/device/session4_checks.sh
set -u
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/det.tar.xz
D=/tmp/pkv/det; R=$D/run; RES=/tmp/res; mkdir -p $RES/det $RES/fp8
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
echo "revision $(cat $D/REVISION)" > "$S"

el "determinism.sh"
OUT=$RES/det timeout 260 bash $D/determinism.sh > $RES/det/stdout.txt 2>&1
echo "determinism rc=$?" >> "$S"

el "FP8 policy sweeps"
sweep() {  # sweep NAME TRACE SMS
  local part=$RES/fp8/part.tsv
  timeout 60 "$R" pkv-bench kernels --trace "bench/traces/$2.tsv" --sm_count "$3" \
    --routes fused,split,workqueue,bucketed-exact,persistent --kv_dtype fp8_e4m3 --iters 30 \
    --wall_iters 5 --nofloor --out "$part" >> $RES/fp8/sweeps.log 2>&1
  echo "rc=$? $1 $2 sms=$3" >> "$S"
  if [ -s "$RES/fp8/$1" ]; then tail -n +2 "$part" >> "$RES/fp8/$1"; else cat "$part" > "$RES/fp8/$1"; fi
  rm -f "$part"
}
for sms in 0 66 28; do sweep sweep_calibration_fp8.tsv calibration-20260622 $sms; done
for sms in 0 66; do sweep sweep_heldout_fp8.tsv heldout-20260623 $sms; done

el "e2e 8B drift"
timeout 150 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
  --decode_lines bucketed-B1-N4096 --variants cublas --prompts "" --kv_cache_dtype auto,fp8_e4m3 \
  --out $RES/fp8/e2e_drift.tsv > $RES/fp8/e2e_drift.log 2>&1
echo "e2e rc=$?" >> "$S"
grep -E "drift|step" $RES/fp8/e2e_drift.log | grep -v "^I " >> "$S"
el done
cat $RES/det/summary.txt >> "$S" 2>/dev/null
tar -C /tmp -czf "$OUT/results.tgz" res
cp "$S" "$OUT/summary.txt"
cat "$S"
