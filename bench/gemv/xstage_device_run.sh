#!/usr/bin/env bash
# One device call of the x-staging work (issues 13/14, NAME=xstage): the GEMV device tests of this
# revision, then `pkv-bench gemv` (bf16, tokens 1, 2, 4, 8) with three binaries side by side: the
# baseline (pkv-bench-base, main's kernels unmodified), this revision (x staged in shared memory)
# and the PKV_GEMV_X_CONST build of it (no x loads at all); the same bench with staging capped
# (--x_stage_max_bytes 0 / 32768), fp16, repeats; then `pkv-bench e2e` for the 8B shape with the
# baseline and this revision. Steps run in priority order while the call's time lasts (BUDGET_S).
# Bundle (CUDA on, sm_90a, this revision with -DPKV_GEMV_X_STAGE=ON; the baseline built from the
# base revision first and copied aside,
# the constant-x build by reconfiguring with -DPKV_GEMV_X_CONST=ON; binaries stripped):
#   /work/shared/tools/device-bundle /work/main/.device/xstage build/bin/pkv-bench \
#     build/bin/gemv_device_test BASE/pkv-bench-base XCONST/pkv-bench-xconst
#   cp bench/gemv/xstage_device_run.sh bench/traces/heldout-20260623.tsv .device/xstage/
#   git rev-parse HEAD > .device/xstage/REVISION; tar -C .device -cJf .device/xstage.tar.xz xstage
# On the GPU machine (carry .device/xstage.tar.xz):
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/xstage.tar.xz && /tmp/pkv/xstage/xstage_device_run.sh
# Writes log.txt and results.tgz (tests.txt, gemv_*.md / .tsv, e2e_*.txt / .tsv: the device tool
# brings back 8 files at most) under $OUT.
set -u
TOP=${OUT:-/tmp/out}; OUT=$TOP/r; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$TOP/log.txt
BUDGET_S=${BUDGET_S:-225}
{
  echo "== $(date -u +%FT%TZ) revision $(cat $B/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv
} >> "$L" 2>&1
# step NAME NEED_S TIMEOUT_S CMD...: runs CMD (output to $OUT/NAME) if NEED_S seconds remain.
step() {
  local name=$1 need=$2 limit=$3; shift 3
  if (( SECONDS + need > BUDGET_S )); then echo "== $name skipped at ${SECONDS}s" >> "$L"; return; fi
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name" 2>&1
  echo "== $name rc $? in $((SECONDS - t0))s" >> "$L"
}
G="gemv --dtype bf16 --iters 100"
step tests.txt 60 110 "$R" gemv_device_test --gtest_brief=1
step gemv_base.md 20 40 "$R" pkv-bench-base $G --out "$OUT/gemv_base.tsv"
step gemv_new.md 20 40 "$R" pkv-bench $G --out "$OUT/gemv_new.tsv"
step gemv_xconst.md 20 40 "$R" pkv-bench-xconst $G --out "$OUT/gemv_xconst.tsv"
E="e2e --shapes llama3-8b --quant awq,fp8 --trace $B/heldout-20260623.tsv --prompts= --steps 12
   --warmup 2 --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 --variants cublas,fused+pdl"
step e2e_new.txt 40 60 "$R" pkv-bench $E --out "$OUT/e2e_new.tsv"
step e2e_base.txt 40 60 "$R" pkv-bench-base $E --out "$OUT/e2e_base.tsv"
step gemv_new_nostage.md 15 30 "$R" pkv-bench $G --tokens 1,8 --x_stage_max_bytes 0 \
  --out "$OUT/gemv_new_nostage.tsv"
step gemv_new_cap32k.md 15 30 "$R" pkv-bench $G --tokens 4,8 --x_stage_max_bytes 32768 \
  --out "$OUT/gemv_new_cap32k.tsv"
step gemv_new_r2.md 15 30 "$R" pkv-bench $G --tokens 1,8 --out "$OUT/gemv_new_r2.tsv"
step gemv_base_r2.md 15 30 "$R" pkv-bench-base $G --tokens 1,8 --out "$OUT/gemv_base_r2.tsv"
step gemv_new_fp16.md 15 30 "$R" pkv-bench gemv --dtype fp16 --iters 100 --tokens 1,8 \
  --out "$OUT/gemv_new_fp16.tsv"
cp "$L" "$OUT/"
tar -C "$TOP" -czf "$TOP/results.tgz" r && rm -rf "$OUT"
cat "$L"
