#!/usr/bin/env bash
# 2026-12-04 (fourteenth session): an item's last full weight batch refills by halves from the
# next item (4-bit and fp8 kernels; dense unchanged: identical registers and code), so a warp
# whose item is one batch (8B gate/up 4-bit: 4 units a warp) keeps loads in flight while it
# computes. The nobar call's bound (-DPKV_GEMV_NO_FINISH) put the item finish at 10-18% of the
# 4-bit/fp8 GEMVs and ~0 of dense. Prediction: 4-bit gate/up T=1 24 -> ~22 us, qkv/o -0..-5%,
# fp8 gate/up -3..-5%, dense +-1%; e2e 8B AWQ B=1 2.55 -> ~2.45 ms, FP8 3.05 -> ~3.0, bf16 lines
# unchanged. Land only if every device test passes and no e2e line is slower.
# Bundle: bench/device/bundle.sh xhalf --base main pkv-bench gemv_device_test \
#   quantized_backend_device_test cuda_backend_device_test
# Call: carry [".device/xhalf.tar.xz"], `bash bench/device/xhalf.sh` (~4 min warm).
# Second call (xhalf2: 4-bit normalized-input kernels only, the rest identical to main's PTX):
# the same bundle named xhalf2, `bash bench/device/xhalf.sh xhalf2`.
set -u
source "$(dirname "$0")/common.sh"
start_call "${1:-xhalf}"
gemv_tests
mkdir -p "$RD/g1" "$RD/g2"  # two rounds, the order swapped
gemv_ab "$RD/g1" "pkv-bench-base pkv-bench" --iters 30 --tokens 1,8 --formats dense,int4,fp8
gemv_ab "$RD/g2" "pkv-bench pkv-bench-base" --iters 30 --tokens 1,8 --formats dense,int4,fp8
pack
e2e_ab "$RD" --shapes llama3-8b,llama3-1b --quant awq,fp8 --variants fused+pdl --temperature 1 \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
el done
