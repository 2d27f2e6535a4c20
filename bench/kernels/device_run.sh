#!/usr/bin/env bash
# One device call of issue 3 (run on the GPU machine from the repository root; writes to $OUT).
# Expects the bundle (.device/bundle: decode_attention_device_test, pkv-bench) and the trace files
# (.device/traces) made on the build machine; see bench/NOTES.md for how.
#   bench/kernels/device_run.sh check     device tests, a bench of every route, variants, memcheck
#   bench/kernels/device_run.sh final     held-out + calibration + third grid at 132/66/28 SMs
set -u
phase=${1:-check}
B=.device/bundle/run
T=.device/traces
L=$OUT/log.txt
export PYTHONUNBUFFERED=1
{
  echo "== $(date -u +%FT%TZ) phase $phase revision $(cat .device/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv
} >> "$L" 2>&1
bench() {  # bench <timeout> <tsv name> <args...>
  local t=$1 name=$2; shift 2
  echo "== pkv-bench kernels $* (-> $name)" >> "$L"
  timeout "$t" $B pkv-bench kernels --flashinfer $T/flashinfer-best-heldout-h200.tsv \
    --out "$OUT/$name" "$@" >> "$L" 2>&1
  echo "== rc $?" >> "$L"
}
ALL=fused,split,workqueue,bucketed-exact,persistent
if [[ $phase == check ]]; then
  timeout 240 $B decode_attention_device_test --gtest_brief=1 > "$OUT/tests.txt" 2>&1
  echo "== device tests rc $?" >> "$L"
  bench 150 heldout.tsv --trace $T/heldout-20260623.tsv --routes $ALL,split:2k,workqueue:2k
  bench 90 variants.tsv --trace $T/heldout-20260623.tsv --routes workqueue,persistent \
    --configs w4s2,w4s4,w8s2,w8s3,w2s4 --iters 50 --wall_iters 5 --floor 0
  bench 40 sm66check.tsv --trace $T/heldout-20260623.tsv --sm_count 66 --iters 20 \
    --wall_iters 3 --lines bucketed-B1-N16384,uniform-B8,zipf-B64 --floor 0
  timeout 120 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 \
    $B decode_attention_device_test --gtest_filter='*Sanitizer*' > "$OUT/sanitizer.txt" 2>&1
  echo "== memcheck rc $?" >> "$L"
else
  for sms in 0 66 28; do
    for grid in heldout-20260623 calibration-20260622 third; do
      bench 60 "${grid%%-*}_sm${sms}.tsv" --trace $T/$grid.tsv --sm_count $sms --routes $ALL \
        --iters "${ITERS:-30}" --wall_iters 5 --floor 0
    done
  done
fi
tail -5 "$OUT/tests.txt" 2>/dev/null
grep -E "^==|^#" "$L" | tail -30
