#!/usr/bin/env bash
# Claimed items for workqueue plans only (branch claims2 after claims20). claims20's rule failed
# on fused/split cells (uniform-B64@132: 1292 -> 1395 us, where the static stride dealt the rows
# better than one CTA an item), while on the workqueue the cells where claims engage (items >
# slots) went 0.976x in geomean (max 1.015x) and the others 0.997x (noise). That reading chose
# this variant, so it is scored on a fresh sweep, by a rule fixed before it:
#   claims (workqueue only) become the default if the device test passes and, on held-out and
#   calibration at 132 and 66 SMs (workqueue, --claim_items false then true, one binary), the
#   cells where claims engage (items > 2 x SMs) have graph_us geomean <= 0.985 and none > 1.03x,
#   and no other cell is > 1.05x (bench/device/claims_rule.py).
# Prediction: engaged cells 0.97-0.98, others 0.99-1.01.
# Bundle: bash bench/device/bundle.sh claimswq decode_attention_device_test pkv-bench (claims2)
# Sourced by call21.sh (its tests run there); alone: `bash bench/device/claimswq.sh` (~1.5 min).
set -u
source "$(dirname "$0")/common.sh"
claimswq_sweeps() {  # claimswq_sweeps DIR
  local sms claim
  for sms in 0 66; do
    for claim in false true; do
      sweep_into "$1/sweep_heldout_claim_$claim.tsv" bench/traces/heldout-20260623.tsv $sms \
        workqueue --claim_items=$claim
      sweep_into "$1/sweep_calibration_claim_$claim.tsv" bench/traces/calibration-20260622.tsv \
        $sms workqueue --claim_items=$claim
    done
  done
}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  start_call claimswq
  device_tests decode_attention_device_test:200
  mkdir -p "$RD/claimswq"; claimswq_sweeps "$RD/claimswq"
  el done
  cat "$S"
fi
