#!/usr/bin/env bash
# 2026-12-04 thirteenth session: what a barrier-free item finish could gain at most. ncu13 has
# the GEMV's warps stalled at the item barrier 15-16% of their cycles (dense 4.25 of 29, fp8 2.26
# of 13.8 an instruction). pkv-bench-nofinish is this tree built with -DPKV_GEMV_NO_FINISH=ON
# (no barrier, no epilogue, nothing stored: timing only),
# beside pkv-bench (the same tree as shipped). Prediction: if the barrier is worth removing,
# 8B gate/up T=1 chain drops >= 5% (dense 59 -> <= 56 us, fp8 35 -> <= 33); if < 2%, drop the
# barrier-free design. Bundle: `bench/device/bundle.sh nofinish --variant
# nofinish:-DPKV_GEMV_NO_FINISH=ON pkv-bench` (the variant folder's first build takes a few
# minutes). Call: carry [".device/nofinish.tar.xz"], `bash bench/device/nofinish.sh` (~40 s warm).
set -u
source "$(dirname "$0")/common.sh"
start_call nofinish
for in in rmsnorm plain; do
  for bin in pkv-bench pkv-bench-nofinish; do
    gemv_line $bin $in "$RD" --iters 20 --tokens 1,8 --formats dense,fp8
  done
done
pack
el done
