#!/usr/bin/env bash
# One device call of issue 3 (run on the GPU machine from the repository root; writes to $OUT).
# Expects the bundle (.device/bundle: decode_attention_device_test, pkv-bench) and the trace files
# (.device/traces) made on the build machine; see bench/NOTES.md for how.
#   bench/kernels/device_run.sh check   device tests, every route on the held-out grid, variants,
#                                       memcheck
#   bench/kernels/device_run.sh full    check + the issue-8 sweeps: held-out, calibration and a
#                                       third grid at 132, 66 and 28 SMs, + a write-flush control
#   bench/kernels/device_run.sh final   device tests, held-out grid, the sweeps, memcheck
# Steps are skipped once the call has run BUDGET_S seconds (default 500), so it ends in time.
set -u
phase=${1:-check}
B=.device/bundle/run
T=.device/traces
L=$OUT/log.txt
start=$SECONDS
budget=${BUDGET_S:-500}
{
  echo "== $(date -u +%FT%TZ) phase $phase revision $(cat .device/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv
} >> "$L" 2>&1
left() { (( SECONDS - start < budget )) || { echo "== skipped (budget): $*" >> "$L"; return 1; }; }
bench() {  # bench <timeout> <tsv name> <args...>; appends to the TSV (one header)
  local t=$1 name=$2; shift 2
  left "$name $*" || return 0
  echo "== pkv-bench kernels $* (-> $name) at $((SECONDS - start))s" >> "$L"
  timeout "$t" $B pkv-bench kernels --flashinfer $T/flashinfer-best-heldout-h200.tsv \
    --out "$OUT/part.tsv" "$@" >> "$L" 2>&1
  echo "== rc $?" >> "$L"
  if [[ -s $OUT/$name ]]; then tail -n +2 "$OUT/part.tsv" >> "$OUT/$name"; else cat "$OUT/part.tsv" > "$OUT/$name"; fi
  rm -f "$OUT/part.tsv"
}
ALL=fused,split,workqueue,bucketed-exact,persistent
HELD=$T/heldout-20260623.tsv
timeout 240 $B decode_attention_device_test --gtest_brief=1 > "$OUT/tests.txt" 2>&1
echo "== device tests rc $? at $((SECONDS - start))s" >> "$L"
bench 150 heldout.tsv --trace $HELD --routes $ALL,split:2k,workqueue:2k
if [[ $phase == full || $phase == final ]]; then
  for sms in 0 66 28; do
    for grid in heldout-20260623 calibration-20260622 third-20260701; do
      bench 60 "sweep_${grid%%-*}.tsv" --trace $T/$grid.tsv --sm_count $sms --routes $ALL \
        --iters "${ITERS:-30}" --wall_iters 5 --nofloor
    done
  done
fi
[[ $phase != final ]] && bench 90 variants.tsv --trace $HELD --routes workqueue,persistent --iters 50 --wall_iters 5 \
  --configs w4s2,w4s3p128,w4s3p256,w8s2,w4s2p256 --nofloor --nograph
[[ $phase == full ]] && bench 60 flushwrite.tsv --trace $HELD --routes workqueue,persistent \
  --flush write --iters 50 --wall_iters 3 --nofloor --nograph
if left memcheck; then
  echo "== memcheck" >> "$OUT/tests.txt"
  timeout 120 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 \
    $B decode_attention_device_test --gtest_filter='*Sanitizer*' >> "$OUT/tests.txt" 2>&1
  echo "== memcheck rc $? at $((SECONDS - start))s" >> "$L"
fi
grep -E "PASSED|FAILED|ERROR SUMMARY" "$OUT/tests.txt"
grep -E "^==|^#" "$L" | tail -40
