#!/usr/bin/env bash
# 16-bit pages: w8s3 for steps of <= 2 rows (head dim <= 128), fitted on call20's calibration
# sweep and passed its held-out rule (bench/kernels/config_rule16.py: held-out geomean regret
# 1.0069 vs 1.0203 for always-w4s3, no cell > 1.005x). On main behind
# CudaBackendOptions::decode_few_row_w8 (off); end to end before it becomes the default:
#   1. cuda_backend_device_test (its "_w8" cases run 1-2 row model steps on w8s3 at head dim 128
#      and 64) and decode_attention_device_test;
#   2. e2e A/B in one binary: variants fused+pdl+prenorm+w4+overlap and ...+w8+overlap (the
#      worker's defaults otherwise), 8B and 1B, B=1 and B=8 at 4k, two runs in opposite orders.
# Prediction: 8B B=1 -40..-55 us a step (-1..-1.2%: ~1.5 us a layer x 32), 1B B=1 (head dim 64,
# not in the sweep) 0..-20 us, B=8 unchanged (+-0.3%; w8 is not taken there).
# Rule (fixed before the call): the default if the device tests pass, the 8B B=1 line is faster
# in both runs and no line is > 0.5% slower in both runs; a 1B B=1 line slower in both runs
# restricts the rule to head dim 128. Reading (build machine): python3 bench/device/cfg16_rule.py
# r/e2e_ab1.tsv r/e2e_ab2.tsv.
# Bundle: bash bench/device/bundle.sh cfg16 cuda_backend_device_test decode_attention_device_test \
#   pkv-bench
# Call: carry [".device/cfg16.tar.xz"], `bash bench/device/cfg16.sh` (~3 min).
set -u
source "$(dirname "$0")/common.sh"
start_call cfg16
device_tests cuda_backend_device_test:200 decode_attention_device_test:200
W4=fused+pdl+prenorm+w4+overlap W8=fused+pdl+prenorm+w8+overlap
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
e2e_line "$R" pkv-bench ab1 "$RD" "${L[@]}" --variants $W4,$W8; pack
e2e_line "$R" pkv-bench ab2 "$RD" "${L[@]}" --variants $W8,$W4; pack
el done
cat "$S"
