#!/usr/bin/env bash
# The twentieth session's calls in one start (starts are scarce): policy20 (confirm19's device
# tests and e2e lines; the calibration and unseen5 sweeps), claims20 (claimed items past one
# wave, A/B sweeps) and cfg20 (16-bit kernel configs w4s3 / w8s2 / w8s3 on the calibration and
# held-out grids: old sweeps had w8 ~1 us faster on B=1 cells, e.g. bf16 bucketed-B1-N4096 13.3
# vs 14.5 us, 2026-12-02-h200-fp8tune; the rule that picks a config per step is fitted on the
# calibration sweep only). Correctness tests of both bundles first, all at once (no timing runs
# beside them), then every timed run alone. Results under r/{policy20,claims20,cfg20}.
# policy20: rule in bench/traces/README.md ("unseen5-20261208.tsv"). claims20 (branch claims2,
# 44db117: graph-sized launches of more items than CTAs take the items past the first wave from an
# atomic counter; one-wave steps never claim): prediction workqueue graph_us geomean -1..-2%,
# two-wave ragged cells -4..-8%, one-wave cells +-1%; rule (fixed before the call, claims17's):
# the default if the device test passes, the workqueue's graph_us geomean over the four sweeps is
# <= 0.99x and no cell of any route is > 1.05x. cfg20: rule in bench/kernels/config_rule16.py.
# Bundles: .device/confirm19.tar.xz (6a612a1), .device/claims20.tar.xz (branch claims2).
# Call: carry both, `bash bench/device/call20.sh` (~8 min).
set -u
source "$(dirname "$0")/common.sh"
RD=$OUT/r; mkdir -p "$RD"
unpack confirm19; B1=$B; R1=$R
unpack claims20; B2=$B; R2=$R
el "confirm19 $(tr '\n' ' ' < "$B1/REVISION") claims20 $(tr '\n' ' ' < "$B2/REVISION")"
el_gpu
P=$RD/policy20 C=$RD/claims20 G=$RD/cfg20; mkdir -p "$P" "$C" "$G"
# 1. device tests, all at once
B=$B1 R=$R1 parallel_tests "$P/tests" decode_attention_device_test:200 cuda_backend_device_test:200 &
B=$B2 R=$R2 parallel_tests "$C/tests" decode_attention_device_test:200 &
wait
grep -hE "Failure|FAILED" "$P"/tests/*.txt "$C"/tests/*.txt | head -5 >> "$S"
pack
# 2. policy20's e2e lines (the confirm19 bundle)
e2e_line "$R1" pkv-bench quota "$P" --shapes llama3-8b --decode_lines bimodal-B64,zipf-B64 \
  --variants pdl
F=fused+pdl+prenorm+overlap
e2e_line "$R1" pkv-bench small "$P" --shapes llama3-8b,llama3-1b \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 --variants $F
pack
# 3. policy20's sweeps
ALL=fused,split,workqueue,bucketed-exact,persistent
R=$R1
for sms in 0 66 28; do
  sweep_into "$P/sweep_calibration.tsv" bench/traces/calibration-20260622.tsv $sms $ALL
done
for sms in 0 66; do
  sweep_into "$P/sweep_unseen5.tsv" bench/traces/unseen5-20261208.tsv $sms $ALL
done
# 4. claims20's A/B sweeps
R=$R2
for sms in 0 66; do
  for claim in false true; do
    sweep_into "$C/sweep_heldout_claim_$claim.tsv" bench/traces/heldout-20260623.tsv $sms \
      fused,split,workqueue --claim_items=$claim
    sweep_into "$C/sweep_calibration_claim_$claim.tsv" bench/traces/calibration-20260622.tsv \
      $sms fused,split,workqueue --claim_items=$claim
  done
done
# 5. cfg20: 16-bit configs (bf16 queries, the worker's dtype for Llama checkpoints)
for grid in calibration-20260622 heldout-20260623; do
  sweep_into "$G/sweep_${grid%%-*}.tsv" bench/traces/$grid.tsv 0 split,workqueue \
    --configs w4s3,w8s2,w8s3 --dtype bf16
done
el done
cat "$S"
