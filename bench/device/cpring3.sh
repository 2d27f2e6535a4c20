#!/usr/bin/env bash
# 2026-12-04 thirteenth session: the weight ring with memory-shaped copies (NOTES "Thirteenth
# session"). cpring2's rings copied each lane's own MMA words (8 rows x 64 bytes a cp.async
# instruction) and ncu13 found them MIO-throttled at 0.60 of DRAM peak; here consecutive lanes
# copy consecutive words of a row's chunk (2 rows x 256 bytes an instruction, L2 prefetch hint),
# XOR-swizzled by row parity for the MMA-layout reads. Variants pkv-bench-cCsS beside main's
# pkv-bench-base; device tests built with c4s2. Bundle: .device/cpring3. Call: carry
# [".device/cpring3.tar.xz"], `bash bench/device/cpring3.sh` (~5.5 min warm).
set -u
source "$(dirname "$0")/common.sh"
start_call cpring3
gemv_tests
BINS="pkv-bench-base pkv-bench-c4s2 pkv-bench-c2s3 pkv-bench-c2s4 pkv-bench-c4s3"
gemv_ab "$RD" "$BINS" --iters 30 --tokens 1,8 --formats dense,fp8
L=(--quant fp8 --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
for bin in $BINS pkv-bench-base; do
  e2e_line "$R" $bin "$bin" "$RD" --shapes llama3-8b "${L[@]}"; pack
done
ncu_env
for bin in pkv-bench-c4s2 pkv-bench-c2s3; do
  ncu_gemv "$bin" "${bin#pkv-bench-}_dense" dense "8B gate/up" plain
done
pack
el done
