#!/usr/bin/env bash
# Quota chunks for the balanced workqueue (branch wqcap, PlanOptions::workqueue_quota_chunks;
# seventeenth session, not run): batches of more (row, kv head) pairs than slots (zipf / bimodal
# B=64-128, 66 SMs above all) could not split their long rows under the k/4-waves item targets
# (unseen2 zipf-B64@66: 528 items for 512 pairs, workqueue 418 vs persistent 336 us). The quota
# chunk P / (k/4 slots) allows up to that many waves plus one item per pair (the workspace's
# capacity). Simulated busiest-CTA load over the mean (stride loop, /tmp scripts of the session):
# unseen2 zipf-B64@132 slots 1.76 -> 1.10, zipf-B128@264 1.71 -> 1.11, bimodal-B64@132 1.35 ->
# 1.06; held-out zipf-B128@264 1.69 -> 1.08, bimodal-B64@132 1.27 -> 1.06.
# Prediction: workqueue graph_us on those cells -10..-25%, geomean over the grids -1..-3%, cells
# of fewer pairs than slots unchanged (same candidates win). Host: plan time at B=64-128 rises
# from ~15 to 40-120 us (plan_only on this machine), to be cut if the layout holds.
# Rule: default on if the workqueue's graph_us geomean (held-out and calibration, 132 and 66 SMs)
# is <= 0.99x with no cell > 1.05x; wq_balance.py's comparison reads the same files.
# Bundle: bash bench/device/bundle.sh wqcap pkv-bench
# Call: carry [".device/wqcap.tar.xz"], `bash bench/device/wqcap.sh` (~2 min).
set -u
source "$(dirname "$0")/common.sh"
start_call wqcap
mkdir -p "$RD/quota" "$RD/base"
for sms in 0 66; do
  for g in heldout-20260623 calibration-20260622; do
    n=sweep_${g%%-*}.tsv
    sweep_into "$RD/base/$n" bench/traces/$g.tsv $sms workqueue,persistent
    sweep_into "$RD/quota/$n" bench/traces/$g.tsv $sms workqueue,persistent \
      --workqueue_quota_chunks=true
  done
done
el done
cat "$S"
