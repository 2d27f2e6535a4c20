#!/usr/bin/env bash
# Prepared 2026-12-04 (fourteenth session) for the next session's first call; not run (device
# lending paused). Three binaries of pkv-bench in one call:
#   pkv-bench-old   421464c: the GEMV before this session
#   pkv-bench-base  main: + cross-item refill by halves in the 4-bit normalized-input kernels
#                   (xhalf2; its logic passed the device tests as part of xhalf, this form never
#                   ran)
#   pkv-bench       branch next15 = main + branch prenorm + branch onebar:
#                   onebar: items whose epilogue needs no cross-thread step (store, RoPE + KV
#                   write, SiLU x up; one part) end after one barrier, the summing threads writing
#                   straight from the warps' fragments (double-buffered by item parity);
#                   prenorm (off unless the e2e variant fused+pdl+prenormN): fused steps of >= N
#                   tokens normalize the q/k/v and gate/up inputs in one RMSNorm launch each and
#                   run those GEMVs on plain input
# and both trees' device tests (main's as NAME-base; next15's include the new prenorm cases).
# Predictions: xhalf2 vs old: AWQ B=1 2.54 -> ~2.49 ms, B=8 -2%, every bf16 / FP8 line unchanged
# (same PTX); onebar vs main: 4-bit and fp8 qkv / gate/up -2..-5%, dense +-1%, e2e AWQ and FP8
# B=1 -1..-3%; prenorm3 vs fused+pdl (same binary): 8B B=8 FP8 4.97 -> ~4.5 ms, AWQ 4.10 ->
# ~3.85, bf16 fused 5.94 -> ~5.45 (vs cuBLAS pdl ~5.9), B=4 about half of that.
# Rules: revert xhalf2 from main if any of main's device tests fails or any old -> base e2e line
# is slower beyond the rounds' spread; land onebar only if next15's device tests pass and no e2e
# line is slower than main's; land prenorm (with the default N where it wins, and fused for 8B
# at B=2..8 if it beats cuBLAS) only if its device cases pass and it wins at B=8.
# Bundle (on branch next15; .device/next15.tar.xz was built on 2026-12-04 with the same binaries
# by hand; 8c1f9d4 has main's kernels):
#   bench/device/bundle.sh next15 --base 8c1f9d4 --base-target gemv_device_test \
#     --base-target quantized_backend_device_test --base-target cuda_backend_device_test \
#     --add .device/base-421464c/build-sm90/bin/pkv-bench:pkv-bench-old \
#     pkv-bench gemv_device_test quantized_backend_device_test cuda_backend_device_test
#   (.device/base-421464c is made by `bundle.sh x --base 421464c pkv-bench` if missing.)
# Read: bench/device/compare.py FILES_AT (tests, gemv and e2e tables with ratios to main).
# Call: carry [".device/next15.tar.xz"], `bash bench/device/next15.sh` (~8-9 min warm: run it
# with timeout_s 600; results are packed after each step).
set -u
source "$(dirname "$0")/common.sh"
start_call next15
gemv_tests gemv_device_test-base:200 quantized_backend_device_test-base:200 \
  cuda_backend_device_test-base:240
mkdir -p "$RD/g1" "$RD/g2"  # two rounds, the order reversed
gemv_ab "$RD/g1" "pkv-bench-old pkv-bench-base pkv-bench" --iters 30 --tokens 1,8 \
  --formats dense,int4,fp8
gemv_ab "$RD/g2" "pkv-bench pkv-bench-base pkv-bench-old" --iters 30 --tokens 1,8 \
  --formats dense,int4,fp8
for round in 1 2; do
  bins="pkv-bench-old pkv-bench-base pkv-bench"
  [ $round = 2 ] && bins="pkv-bench pkv-bench-base pkv-bench-old"
  for bin in $bins; do
    e2e_line "$R" "$bin" "${bin}_$round" "$RD" --shapes llama3-8b,llama3-1b --quant awq,fp8 \
      --variants fused+pdl --temperature 1 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
    pack
  done
done
for round in 1 2; do  # prenorm: the same binary with and without it, and cuBLAS beside
  e2e_line "$R" pkv-bench "prenorm_$round" "$RD" --shapes llama3-8b,llama3-1b --quant awq,fp8 \
    --variants pdl,fused+pdl,fused+pdl+prenorm3 --temperature 1 \
    --decode_lines bucketed-B4-N4096,bucketed-B8-N4096
  pack
done
el done
