#!/usr/bin/env bash
# One GPU-machine run for the fused small-batch path, programmatic dependent launch (PDL) and the
# autotuned cuBLASLt GEMMs: the device tests of the new paths, then pkv-bench e2e with every
# variant for llama3-8b and llama3-1b at B = 1, 8 (and 32), 64, then (time permitting)
# compute-sanitizer on the fused kernels and per-kernel DRAM throughput of one fused 8B step
# under ncu. Builds nothing; every phase has a
# timeout and the whole run stays under 4 minutes (~1.5 expected). Logs and TSVs go to $OUT.
# See bench/results/e2e-2026-11-29-h200/FUSION.md for what to look for.
#
# Build machine (repo root), before the device call:
#   ninja -C build-fuse -j2 pkv-bench cuda_backend_device_test gemv_device_test \
#     gemm_tune_device_test skinny_gemm_device_test
#   B=build-fuse/bin; rm -rf /tmp/fb; /work/shared/tools/device-bundle /tmp/fb/fusion \
#     $B/pkv-bench $B/cuda_backend_device_test $B/gemv_device_test $B/gemm_tune_device_test \
#     $B/skinny_gemm_device_test
#   strip --strip-debug /tmp/fb/fusion/bin/*; strip --strip-unneeded /tmp/fb/fusion/lib/*
#   mkdir -p .device && (cd /tmp/fb && tar cJf "$OLDPWD/.device/fusion.tar.xz" fusion)
#   git rev-parse HEAD > .device/REVISION_fusion
# GPU machine (device tool, carry [".device/fusion.tar.xz", ".device/REVISION_fusion"]):
#   bash bench/e2e/fusion_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s); BUDGET=225  # seconds for everything after unpacking
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
# A phase's timeout: its cap, or what is left of the budget minus `reserve` for later phases.
cap() { local left=$(( BUDGET - ($(date +%s) - T0) - $2 )); (( left < $1 )) && echo $(( left > 1 ? left : 1 )) || echo "$1"; }
python3 - <<'PY'
import tarfile; tarfile.open('.device/fusion.tar.xz').extractall('/tmp/fb')
PY
R=/tmp/fb/fusion/run
S="$OUT/summary.txt"
{ el start; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv;
  cat .device/REVISION_fusion 2>/dev/null; date -u; } > "$S" 2>&1

el device tests >> "$S"
for tl in gemv_device_test:40:160 cuda_backend_device_test:60:120 gemm_tune_device_test:20:110 \
          skinny_gemm_device_test:15:100; do
  IFS=: read -r t c r <<< "$tl"; echo "=== $t" >> "$OUT/device_tests.log"
  timeout "$(cap "$c" "$r")" "$R" "$t" --gtest_brief=1 >> "$OUT/device_tests.log" 2>&1
  echo "rc=$?" >> "$OUT/device_tests.log"
done
grep -E "^===|PASSED|FAILED|rc=" "$OUT/device_tests.log" >> "$S"

el bench >> "$S"
# The fused path and PDL (B <= 8 for fused), then in a second process the tuned GEMMs (a tuning
# failure cannot take the first measurement with it).
timeout "$(cap 70 60)" "$R" pkv-bench e2e --shapes llama3-8b,llama3-1b \
  --trace bench/traces/heldout-20260623.tsv \
  --decode_lines bucketed-B1-N4096,uniform-B1,bucketed-B8-N4096,bimodal-B64 \
  --variants cublas,skinny,pdl,fused,fused+pdl,fused+pdl+pf4,fused+pdl+pf16 \
  --prompts= --steps 32 --warmup 4 --out "$OUT/fusion_e2e.tsv" > "$OUT/fusion_e2e.log" 2>&1
echo "bench rc=$?" >> "$S"
sed -n '/byte-floor fraction per variant/,$p' "$OUT/fusion_e2e.log" >> "$S"
timeout "$(cap 60 30)" "$R" pkv-bench e2e --shapes llama3-8b,llama3-1b \
  --trace bench/traces/heldout-20260623.tsv \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B32,bimodal-B64 \
  --variants cublas,pdl,lt,lt+pdl --prompts= --steps 32 --warmup 4 \
  --out "$OUT/lt_e2e.tsv" > "$OUT/lt_e2e.log" 2>&1
echo "bench lt rc=$?" >> "$S"
sed -n '/byte-floor fraction per variant/,$p' "$OUT/lt_e2e.log" >> "$S"
grep -E "tuned [0-9]+ GEMM" "$OUT/lt_e2e.log" >> "$S"

el sanitizer >> "$S"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  { LD_LIBRARY_PATH=/tmp/fb/fusion/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} \
      timeout "$(cap 25 12)" "$CS" --tool memcheck --print-limit 5 \
      /tmp/fb/fusion/bin/gemv_device_test --gtest_brief=1 \
      --gtest_filter='*Residual*/bf16:*Rope*/bf16:*Chained*/bf16' 2>&1 | tail -6
    LD_LIBRARY_PATH=/tmp/fb/fusion/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} \
      timeout "$(cap 25 10)" "$CS" --tool racecheck --print-limit 5 \
      /tmp/fb/fusion/bin/gemv_device_test --gtest_brief=1 \
      --gtest_filter='*Residual*/bf16:*Silu*/bf16' 2>&1 | tail -6; } > "$OUT/sanitizer.log" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" >> "$S"
fi

el ncu >> "$S"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$NCU" ] && (( $(cap 60 0) > 20 )); then
  # The first (eager) fused 8B B=1 step: layers 1 and 2 (q/k/v, attention, o, gate/up, down), each
  # kernel alone with cold caches (ncu serialises and flushes): its DRAM throughput vs peak.
  LD_LIBRARY_PATH=/tmp/fb/fusion/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} \
    timeout "$(cap 60 2)" "$NCU" --clock-control none -k 'regex:GemvKernel|Decode|decode' \
    --launch-skip 5 --launch-count 10 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    /tmp/fb/fusion/bin/pkv-bench e2e --shapes llama3-8b --decode_lines bucketed-B1-N4096 \
    --variants fused --prompts= --steps 1 --warmup 1 --out /tmp/ncu_e2e.tsv > "$OUT/ncu.log" 2>&1
  echo "ncu rc=$?" >> "$S"
  grep -E "GemvKernel|ecode|gpu__time|dram__" "$OUT/ncu.log" | head -40 >> "$S"
fi
el done >> "$S"
cat "$S"
