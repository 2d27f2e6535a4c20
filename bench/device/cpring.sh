#!/usr/bin/env bash
# Prepared 2026-12-04 (twelfth session), not run yet: branch `cpring` (patch
# bench/results/2026-12-04-h200-next12/cpring-1b065b3.patch). Dense and fp8 GEMV weights go
# through a per-warp cp.async ring of 6 one-KB units in shared memory (12 on deep plans), 4-bit
# weights with their scale words through a ring of 4 (1.25 KB units), refilled unit by unit
# across items, so a warp keeps ring - 1 units in flight while it computes (ncu12: fp8 gate/up
# warps waited on memory only 34% of the time, DRAM 68% of peak; dense 67% / 83%).
# Prediction: fp8 gate/up T=1 37 -> ~31 us, down 21 -> ~17; dense gate/up 59 -> ~56; int4 gate/up
# ~27 -> ~22; e2e 8B B=1: FP8 3.00 -> ~2.75 ms, AWQ 2.55 -> ~2.3, bf16 4.50 -> ~4.35; B=8 within
# +-2% (risk: 8B gate/up dense/fp8 no longer stages x at 4 tokens: 22 KB of staging budget left).
# To prepare: `git apply` the patch on a branch, build pkv-bench and the three device tests
# (sm_90a), device-bundle them into .device/cpring with main's pkv-bench as pkv-bench-base,
# REVISION, strip, tar -cJf .device/cpring.tar.xz. Call: carry [".device/cpring.tar.xz"],
# `bash bench/device/cpring.sh` (~4 min warm). Land only if every device test passes and no e2e
# line is slower; PKV_GEMV_CP_RING_INT4=0 (or PKV_GEMV_CP_RING=0) turns a part off.
set -u
source "$(dirname "$0")/common.sh"
start_call cpring
gemv_tests
gemv_ab "$RD" "pkv-bench-base pkv-bench" --iters 50 --tokens 1,8 --formats dense,int4,fp8
e2e_ab "$RD" --shapes llama3-8b,llama3-1b --quant awq,fp8 --variants fused+pdl --temperature 1 \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
el done
grep -vE "decode_attention|scheduler host|weights a decode" "$S"
