#!/usr/bin/env bash
# 16-bit pages: w8s3 for steps of <= 2 rows (head dim <= 128), fitted on cfg20's calibration sweep
# and passed its held-out rule (bench/kernels/config_rule16.py: held-out geomean regret 1.0069 vs
# 1.0203 for always-w4s3, no cell > 1.005x). End to end before it becomes the default:
#   1. cuda_backend_device_test and decode_attention_device_test (B=1 model steps now run w8s3);
#   2. e2e A/B (pkv-bench-base = main's w4s3 beside this branch), 8B and 1B, B=1 and B=8 at 4k,
#      the worker's variant (fused+pdl+prenorm+overlap), two rounds in alternating order.
# Prediction: 8B B=1 -40..-55 us a step (-1..-1.2%: ~1.5 us a layer x 32), 1B B=1 (head dim 64,
# not in the sweep) 0..-20 us, B=8 unchanged (+-0.3%).
# Rule (fixed before the call): the default if the device tests pass, the 8B B=1 line is faster
# in both rounds and no line is > 0.5% slower in both rounds; a 1B B=1 line slower in both rounds
# restricts the rule to head dim 128.
# Bundle: bash bench/device/bundle.sh cfg16 --base main cuda_backend_device_test \
#   decode_attention_device_test pkv-bench   (on branch cfg16)
# Call: carry [".device/cfg16.tar.xz"], `bash bench/device/cfg16.sh` (~5 min).
set -u
source "$(dirname "$0")/common.sh"
start_call cfg16
el "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
device_tests cuda_backend_device_test:200 decode_attention_device_test:200
e2e_ab "$RD" --shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 \
  --variants fused+pdl+prenorm+overlap
el done
cat "$S"
