#!/usr/bin/env bash
# Seventeenth session, after policy17 kept the balanced workqueue layout (bench/NOTES.md): the
# default flipped (PlanOptions::workqueue_balanced) and the policy files refitted on its
# calibration sweep. This call checks it end to end:
#   1. device tests of this tree: decode, FP8 KV, CUDA backend (every route plans with the new
#      layout);
#   2. e2e, 8B bf16, variants pdl (the balanced layout, now the default) and pdl+waves (the wave
#      model) side by side per line, A B B A, on the held-out grid's ragged mid-batch lines.
# Prediction: the lines where the policy picks the workqueue -2..-8% (attention is 60-80% of
# those steps), the others within +-1%.
# Bundle: bash bench/device/bundle.sh confirm17 decode_attention_device_test \
#   decode_fp8_device_test fp8_kv_device_test cuda_backend_device_test pkv-bench
# Call: carry [".device/confirm17.tar.xz"], `bash bench/device/confirm17.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
start_call confirm17
device_tests decode_attention_device_test:200 decode_fp8_device_test:200 \
  fp8_kv_device_test:200 cuda_backend_device_test:240
LINES=uniform-B16,uniform-B32,bimodal-B16,bimodal-B32,bimodal-B64,zipf-B32,zipf-B64,zipf-B128
# One process, each line measured A B B A (the variants run line by line).
e2e_line "$R" pkv-bench layout "$RD" --shapes llama3-8b --variants pdl,pdl+waves,pdl+waves,pdl \
  --decode_lines $LINES
pack
el done
cat "$S"
