#!/usr/bin/env bash
# Deep GEMV batches (2026-12-03, tenth session): plans of <= 2 x SMs items (8B o and down: 256
# tiles) run kernels whose warps keep 8 units of weight loads in flight (2 CTAs an SM, 128 KB per
# SM) instead of 4 (64 KB). Base: main's code (the minsplit bundle's pkv-bench, same 16-bit plans).
# Bundle .device/deep: pkv-bench, pkv-bench-base, gemv / cuda_backend / quantized_backend tests.
# Call: carry [".device/deep.tar.xz"], `bash bench/device/deep.sh` (~3 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack deep
RD=$OUT/r; mkdir -p "$RD"
parallel_tests "$RD" gemv_device_test:200 cuda_backend_device_test:200 quantized_backend_device_test:200
pack
L8=(--shapes llama3-8b,llama3-1b --variants fused+pdl,pdl --temperature 1
    --decode_lines bucketed-B1-N4096,bucketed-B1-N16384,bucketed-B8-N4096)
LQ=(--shapes llama3-8b --quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096)
for i in 1 2 3; do
  for bin in $(ab_bins $i); do
    e2e_line "$R" $bin "m_${bin}_$i" "$RD" "${L8[@]}"
    e2e_line "$R" $bin "q_${bin}_$i" "$RD" "${LQ[@]}"
  done
  pack
done
el done
