#!/usr/bin/env bash
# 2026-12-04 thirteenth session: dense and fp8 GEMV kernels compiled for 4 CTAs an SM
# (PKV_GEMV_MIN_CTAS=4: 64 registers, 36-240 bytes of spills) instead of 3 (80 registers): 32
# warps an SM, a third more register batches in flight (w4speed: 3 -> 2 CTAs cost dense 0.81 ->
# 0.51 of stream, tracking bytes in flight). pkv-bench (4) beside main's pkv-bench-base (3).
# Bundle .device/ctas4 (pkv-bench, gemv and cuda backend device tests of the build, base copied
# in). Call: carry [".device/ctas4.tar.xz"], `bash bench/device/ctas4.sh` (~3.5 min warm).
set -u
source "$(dirname "$0")/common.sh"
start_call ctas4
parallel_tests "$RD/tests" gemv_device_test:200 cuda_backend_device_test:240
pack
gemv_ab "$RD" "pkv-bench-base pkv-bench" --iters 30 --tokens 1,8 --formats dense,fp8
e2e_ab "$RD" --shapes llama3-8b,llama3-1b --quant fp8 --variants fused+pdl --temperature 1 \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
el done
