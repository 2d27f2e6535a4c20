#!/usr/bin/env bash
# Prepared 2026-12-04 (thirteenth session); run in the fourteenth (results/2026-12-04-h200-next14/nobar:
# nobar slower everywhere, not landed; the bound: -10..-18% on 4-bit/fp8, nothing on dense). `git apply
# bench/results/2026-12-04-h200-next13/nobar-72d4831.patch` on a branch of main (it touches
# kernels/model/gemv_kernel.cuh and gemv_epilogue.cuh only): the GEMV's items end without a
# CTA barrier; the last of the 8 warps to arrive sums the fragments and runs the epilogue from its
# registers (FinishItemByLastWarp), the others go straight to their next item. Also measures the
# bound: pkv-bench-nofinish (no barrier, no epilogue, nothing stored). Prediction: if nofinish
# shows >= 5% on the 8B gate/up T=1, nobar keeps most of it: dense gate/up 59 -> ~56 us, fp8 35 ->
# ~33; e2e 8B bf16 B=1 4.47 -> ~4.35, FP8 3.00 -> ~2.9, AWQ 2.55 -> ~2.5, 1B -2..-4%. Land only if
# every device test passes and no e2e line is slower.
# Bundle (on that branch; ~8 min the first time: the base worktree and variant folder build whole):
#   bench/device/bundle.sh nobar --base main --variant nofinish:-DPKV_GEMV_NO_FINISH=ON \
#     pkv-bench gemv_device_test quantized_backend_device_test cuda_backend_device_test
# Call: carry [".device/nobar.tar.xz"], `bash bench/device/nobar.sh` (~5 min warm).
set -u
source "$(dirname "$0")/common.sh"
start_call nobar
gemv_tests
gemv_ab "$RD" "pkv-bench-base pkv-bench-nofinish pkv-bench" --iters 30 --tokens 1,8 \
  --formats dense,int4,fp8
e2e_ab "$RD" --shapes llama3-8b,llama3-1b --quant awq,fp8 --variants fused+pdl --temperature 1 \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
el done
