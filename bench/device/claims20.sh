#!/usr/bin/env bash
# Claimed items, second form (branch claims2, twentieth session): graph-sized launches of more
# items than CTAs take the items past the first wave from an atomic counter; steps of one wave
# never claim (claims17 claimed on every launch: one-wave cells +1.2-1.5 us, rejected). On top of
# quota chunks (policy19): the graph form still trails one CTA an item by 4-10% on two-wave ragged
# cells (zipf-B16@132 60.4 vs 54.9 us, bimodal-B16@66 149.2 vs 140.6, H100 quota sweeps).
#   1. decode_attention_device_test (the graph-replay test runs with and without claims: same bits
#      as a fresh run, counters back at zero after every replay);
#   2. kernel sweeps, held-out and calibration at 132 and 66 SMs, routes fused/split/workqueue,
#      --claim_items=false then true, the same binary; compare graph_us.
# Prediction: workqueue graph_us geomean -1..-2%, two-wave ragged cells -4..-8% (toward their
# gpu_us), one-wave cells within +-1% (the same plan, one compare more); fused/split +-1% except
# their many-item cells (fused/split at B >= 64 have more pairs than slots: -1..-5%).
# Rule (fixed before the call, claims17's): claims become the default (PlanOptions::claim_items
# = true) if the device test passes, the workqueue's graph_us geomean over the four sweeps is
# <= 0.99x, and no cell of any route is > 1.05x.
# Bundle: bash bench/device/bundle.sh claims20 decode_attention_device_test pkv-bench (on claims2)
# Call: carry [".device/claims20.tar.xz"], `bash bench/device/claims20.sh` (~3 min).
set -u
source "$(dirname "$0")/common.sh"
start_call claims20
el "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
device_tests decode_attention_device_test:240
for sms in 0 66; do
  for claim in false true; do
    sweep_into "$RD/sweep_heldout_claim_$claim.tsv" bench/traces/heldout-20260623.tsv $sms \
      fused,split,workqueue --claim_items=$claim
    sweep_into "$RD/sweep_calibration_claim_$claim.tsv" bench/traces/calibration-20260622.tsv \
      $sms fused,split,workqueue --claim_items=$claim
  done
done
el done
cat "$S"
