#!/usr/bin/env bash
# Claimed items (PlanOptions::claim_items, seventeenth session): graph-sized launches take the
# items past the first wave from an atomic counter instead of the static stride loop, so the
# hardware's timing packs the tail (policy17: the graph form trails one CTA an item by ~2%
# geomean, up to 15% on zipf-B128@66).
#   1. decode_attention_device_test (the graph-replay test runs with and without claims: same
#      bits as a fresh run, counters back at zero after every replay);
#   2. kernel sweeps, held-out at 132 and 66 SMs, routes fused/split/workqueue,
#      --claim_items=false then true; compare graph_us.
# Prediction: workqueue graph_us geomean -1..-3%, ragged B >= 16 cells up to -10% (toward their
# gpu_us); cells of one wave unchanged (no claim is made); split/fused within +-1%.
# Rule: claims become the default if the device test passes and the workqueue's graph_us
# geomean over both sweeps is <= 0.99x with no cell > 1.05x.
# Bundle: bash bench/device/bundle.sh claims17 decode_attention_device_test pkv-bench
# Call: carry [".device/claims17.tar.xz"], `bash bench/device/claims17.sh` (~3 min).
# (On main since the eighteenth session so next18.sh can run it; the bundle comes from `claims`.)
set -u
source "$(dirname "$0")/common.sh"
start_call claims17
parallel_tests "$RD/tests" decode_attention_device_test:240
grep -hE "Failure|FAILED|PASSED" "$RD"/tests/*.txt | head -5 >> "$S"
pack
sweep() {  # sweep CLAIM OUT_NAME TRACE_FILE SMS
  local part=$RD/part.tsv
  timeout 120 "$R" pkv-bench kernels --trace "$3" --sm_count "$4" --routes fused,split,workqueue \
    --claim_items=$1 --iters 30 --wall_iters 5 --nofloor --out "$part" >> "$RD/sweeps.log" 2>&1
  echo "rc=$? claim=$1 $2 $3 sms=$4" >> "$S"
  if [ -s "$RD/$2" ]; then tail -n +2 "$part" >> "$RD/$2"; else cat "$part" > "$RD/$2"; fi
  rm -f "$part"
  pack
}
for sms in 0 66; do
  for claim in false true; do
    sweep $claim sweep_heldout_claim_$claim.tsv bench/traces/heldout-20260623.tsv $sms
  done
done
el done
cat "$S"
