#!/usr/bin/env bash
# The twentieth session's first call: confirm19 (the defaults of the nineteenth session on a GPU:
# quota chunks and step pipelining) and the fifth unseen grid's sweeps (rule in
# bench/traces/README.md, "unseen5-20261208.tsv", fixed before this call).
#   1. decode_attention_device_test and cuda_backend_device_test (every route, pipelined and
#      serial steps, against the CPU reference; plans with quota chunks);
#   2. e2e 8B bimodal/zipf B=64 (the lines quota chunks change) and the B=1/B=8 lines of the
#      issue-14 bars on this card (fused+pdl+prenorm+overlap: the worker's defaults), one pass;
#   3. sweeps: calibration (every route; 132, 66, 28 SMs) and unseen5 (every route; 132, 66).
# Bundle: `.device/confirm19.tar.xz` (built at 6a612a1: plans equal to 228092e's and to the fit's
# revision; the policy is fitted on the build machine from these sweeps).
# Call: carry [".device/confirm19.tar.xz"], `bash bench/device/policy20.sh` (~5 min).
set -u
source "$(dirname "$0")/common.sh"
start_call confirm19
el "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
device_tests decode_attention_device_test:150 cuda_backend_device_test:150
e2e_line "$R" pkv-bench quota "$RD" --shapes llama3-8b --decode_lines bimodal-B64,zipf-B64 \
  --variants pdl
pack
F=fused+pdl+prenorm+overlap
e2e_line "$R" pkv-bench small "$RD" --shapes llama3-8b,llama3-1b \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 --variants $F
pack
ALL=fused,split,workqueue,bucketed-exact,persistent
for sms in 0 66 28; do
  sweep_into "$RD/sweep_calibration.tsv" bench/traces/calibration-20260622.tsv $sms $ALL
done
for sms in 0 66; do
  sweep_into "$RD/sweep_unseen5.tsv" bench/traces/unseen5-20261208.tsv $sms $ALL
done
el done
cat "$S"
