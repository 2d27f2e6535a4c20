#!/usr/bin/env bash
# 2026-12-04 thirteenth session: the weight ring with chunks (NOTES "Thirteenth session"). The
# first ring (one-unit slots, cpring.sh) streamed 8B gate/up at 0.52 of peak where the register
# batch streams 0.84: one 64-byte request per row at a time. Here a slot holds CHUNK consecutive
# units (128 or 256 bytes of a row a request group) and a warp has SLOTS slots; dense and fp8
# only (4-bit keeps its register batches). Variants pkv-bench-cCsS (chunk C, S slots) beside
# main's pkv-bench-base; device tests built with c2s3. Bundle: .device/cpring2 (bin/pkv-bench is
# c2s3 so device-bundle collects its libraries; the variants copied in). Call: carry
# [".device/cpring2.tar.xz"], `bash bench/device/cpring2.sh` (~5 min warm).
set -u
source "$(dirname "$0")/common.sh"
start_call cpring2
gemv_tests
BINS="pkv-bench-base pkv-bench-c2s3 pkv-bench-c4s2 pkv-bench-c2s4 pkv-bench-c4s3"
gemv_ab "$RD" "$BINS" --iters 30 --tokens 1,8 --formats dense,fp8
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for bin in $BINS pkv-bench-base; do
  e2e_line "$R" $bin "$bin" "$RD" --shapes llama3-8b "${L[@]}"; pack
done
el done
