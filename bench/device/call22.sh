#!/usr/bin/env bash
# The twenty-second session's second call: the bulk-copy GEMV inside the engine
# (GemvArgs::bulk, kernels/model/gemv_bulk.cuh; CudaBackendOptions::fused_gemv_bulk, off).
# Device tests (gemv: BulkOneTokenMatchesReference beside every other case; cuda_backend: the two
# llama_wide _bulk cases beside the rest), then the e2e A/B (fused+pdl+prenorm+overlap vs
# fused+pdl+prenorm+bulk+overlap, two runs in opposite orders, 8B and 1B at B=1 and B=8) and the
# engine's GEMV bench at one token. Rule (bench/NOTES.md, twenty-second session): default on if
# the device tests pass, 8B B=1 is faster in both runs and no line is > 0.5% slower in both.
# Bundle: bash bench/device/bundle.sh bulk gemv_device_test cuda_backend_device_test pkv-bench
# Call: carry [".device/bulk.tar.xz"], `bash bench/device/call22.sh` (~2.5 min).
set -u
source "$(dirname "$0")/common.sh"
start_call bulk
D=$RD/bulk; mkdir -p "$D"
RD=$D device_tests gemv_device_test:200 cuda_backend_device_test:200
A=fused+pdl+prenorm+overlap Z=fused+pdl+prenorm+bulk+overlap
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
time_for 120 "e2e ab1" && { e2e_line "$R" pkv-bench ab1 "$D" "${L[@]}" --variants $A,$Z; pack; }
time_for 120 "e2e ab2" && { e2e_line "$R" pkv-bench ab2 "$D" "${L[@]}" --variants $Z,$A; pack; }
time_for 60 "gemv" && gemv_bulk_ab "$D"
pack
el done
cat "$S"
