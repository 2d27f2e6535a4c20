#!/usr/bin/env bash
# The route policy on the third unseen grid (rule: bench/traces/README.md, unseen3-20261206.tsv,
# written before any sweep of it): calibration (132, 66, 28 SMs) and unseen3 (132, 66) sweeps,
# every route, 16-bit pages, with this revision's pkv-bench. After the call, on the build machine:
#   bench/policy/score_unseen.py --bench build-sm90/bin/pkv-bench --sweeps <results>/r \
#     --unseen_sweep <results>/r/sweep_unseen3.tsv --unseen_trace bench/traces/unseen3-20261206.tsv \
#     --out /tmp/pol18
# Prediction (seventeenth session: the min_best_lead fit's held-out 1.038 / 1.034, third 1.047 /
# 1.136): 132 SMs within the bar; 66 SMs at the bar or over it if the grid has a zipf or bimodal
# B=64 line where persistent leads the 4-wave-capped workqueue (bench/NOTES.md).
# Bundle: bash bench/device/bundle.sh policy18 pkv-bench
# Call: carry [".device/policy18.tar.xz"], `bash bench/device/policy18.sh` (~2 min).
set -u
source "$(dirname "$0")/common.sh"
start_call policy18
ALL=fused,split,workqueue,bucketed-exact,persistent
for sms in 0 66 28; do
  sweep_into "$RD/sweep_calibration.tsv" bench/traces/calibration-20260622.tsv $sms $ALL
done
for sms in 0 66; do sweep_into "$RD/sweep_unseen3.tsv" bench/traces/unseen3-20261206.tsv $sms $ALL; done
el done
cat "$S"
