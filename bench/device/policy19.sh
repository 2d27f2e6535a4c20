#!/usr/bin/env bash
# Quota chunks for batches of more (row, kv head) pairs than slots (branch wqcap2) and the route
# policy on the fourth unseen grid; rule fixed before the first sweep in bench/traces/README.md
# ("unseen4-20261207.tsv"). Every sweep twice, without and with --workqueue_quota_chunks, so the
# rule's step 1 decides the layout and step 2 fits and scores that layout's sweeps:
#   base/ and quota/: sweep_calibration.tsv (every route, 132, 66, 28 SMs), sweep_heldout.tsv
#   (workqueue, persistent; 132, 66), sweep_unseen4.tsv (every route; 132, 66).
# Prediction (wqcap on the H100, quota everywhere): the cells of more pairs than slots -9..-15%
# (zipf-B64/B128, bimodal-B64 at 66 SMs, zipf-B128 at 132); the others identical plans, so within
# noise (+-2%); unseen4's worst cell at 132 SMs near 1.05 if its zipf-B128 behaves like unseen3's.
# After the call, on the build machine (step 1, then step 2 with L = base or quota):
#   python3 bench/device/quota_rule.py <r>
#   bench/policy/score_unseen.py --bench build-sm90/bin/pkv-bench --sweeps <r>/L \
#     --unseen_sweep <r>/L/sweep_unseen4.tsv --unseen_trace bench/traces/unseen4-20261207.tsv
# Bundle (on branch wqcap2): bash bench/device/bundle.sh policy19 pkv-bench
# Call: carry [".device/policy19.tar.xz"], `bash bench/device/policy19.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
start_call policy19
ALL=fused,split,workqueue,bucketed-exact,persistent
mkdir -p "$RD/base" "$RD/quota"
both() {  # both FILE TRACE SMS ROUTES: the sweep into base/ and quota/
  sweep_into "$RD/base/$1" "bench/traces/$2.tsv" "$3" "$4"
  sweep_into "$RD/quota/$1" "bench/traces/$2.tsv" "$3" "$4" --workqueue_quota_chunks=true
  pack
}
for sms in 0 66 28; do both sweep_calibration.tsv calibration-20260622 $sms $ALL; done
for sms in 0 66; do both sweep_heldout.tsv heldout-20260623 $sms workqueue,persistent; done
for sms in 0 66; do both sweep_unseen4.tsv unseen4-20261207 $sms $ALL; done
el done
cat "$S"
