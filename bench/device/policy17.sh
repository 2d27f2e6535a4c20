#!/usr/bin/env bash
# The planner's balanced workqueue layout (PlanOptions::workqueue_balanced) against the wave model,
# and the route policy on the second unseen grid (seventeenth session). Rule, fixed before any
# sweep of the grid (bench/traces/README.md, unseen2-20261205.tsv):
#   1. balanced becomes the default only if the workqueue route's geomean GPU time with it is
#      <= 0.99x the wave model's on calibration (132/66/28 SMs), held-out and third (132/66), no
#      cell > 1.05x: `python3 bench/device/wq_balance.py <results>/r` prints the verdict
#      (balanced/sweep_X.tsv against waves/wq_sweep_X.tsv, the wave model's workqueue alone);
#   2. the kept layout's calibration sweep is the only fitting data; score once on unseen2:
#      bench/policy/score_unseen.py --bench build-sm90/bin/pkv-bench --sweeps <results>/r/<layout> \
#        --unseen_sweep <results>/r/<layout>/sweep_unseen2.tsv \
#        --unseen_trace bench/traces/unseen2-20261205.tsv --out /tmp/pol17
#      (<layout>: balanced or waves; each folder holds sweep_calibration.tsv and sweep_unseen2.tsv).
# Prediction (the layout's simulated busiest-CTA load, bench/NOTES.md seventeenth session): the
# ragged mid-batch cells (bimodal/zipf/uniform B16-B128) -5..-15% on the workqueue route, bucketed
# cells within +-1% (same items, same chunk), so the policy's worst cells (persistent ahead of the
# workqueue by 9-17% on bimodal B16-B32) close to within 5%.
# Bundle: bash bench/device/bundle.sh policy17 pkv-bench
# Call: carry [".device/policy17.tar.xz"], `bash bench/device/policy17.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
start_call policy17
mkdir -p "$RD/balanced" "$RD/waves"
sweep() {  # sweep LAYOUT OUT_NAME TRACE_FILE SMS ROUTES [FLAG...]
  local bal=false
  [ "$1" = balanced ] && bal=true
  sweep_into "$RD/$1/$2" "$3" "$4" "$5" --workqueue_balanced=$bal "${@:6}"
}
T=bench/traces
ALL=fused,split,workqueue,bucketed-exact,persistent
grid() {  # grid OUT_NAME TRACE_FILE SMS...: balanced with every route, waves' workqueue alone
  local out=$1 trace=$2; shift 2
  for sms in "$@"; do
    sweep balanced "$out" "$trace" "$sms" "$ALL"
    sweep waves "wq_$out" "$trace" "$sms" workqueue
  done
}
grid sweep_calibration.tsv $T/calibration-20260622.tsv 0 66 28
grid sweep_heldout.tsv $T/heldout-20260623.tsv 0 66
grid sweep_third.tsv bench/results/2026-11-29-h200-run3/third-20260701.tsv 0 66
# The new grid: every route under both layouts (either may be the one step 1 keeps).
for sms in 0 66; do
  sweep balanced sweep_unseen2.tsv $T/unseen2-20261205.tsv $sms "$ALL"
  sweep waves sweep_unseen2.tsv $T/unseen2-20261205.tsv $sms "$ALL"
done
# The wave layout's calibration sweep with every route (the fit's data if step 1 keeps it).
for sms in 0 66 28; do
  sweep waves sweep_calibration.tsv $T/calibration-20260622.tsv $sms "$ALL"
done
# FP8 pages (the -fp8 policy files): calibration under both layouts, every route.
for sms in 0 66 28; do
  sweep balanced sweep_calibration_fp8.tsv $T/calibration-20260622.tsv $sms "$ALL" --kv_dtype fp8_e4m3
  sweep waves sweep_calibration_fp8.tsv $T/calibration-20260622.tsv $sms "$ALL" --kv_dtype fp8_e4m3
done
el done
cat "$S"
