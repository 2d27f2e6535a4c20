#!/usr/bin/env bash
# One device call of the w4gemv work (issue 13, 4-bit GEMV toward its byte floor; issue 14's
# dense GEMV must not get slower): this branch's `pkv-bench gemv` (x staged in shared memory,
# 4-bit group scale per unit in fp32) beside main's binary (pkv-bench-base) in the same session,
# the same binary with staging off (--x_stage_max_bytes 0: isolates the 4-bit change from the
# staging) and with the L2 prefetch of each next item (--prefetch_steps 4), `pkv-bench e2e` for the 8B shape bf16 + AWQ at B=1 and B=8 with a 4k context for both
# binaries, then the device tests. Steps run in priority order while BUDGET_S lasts. CALL=1 (at
# ec61f79, x staged whenever it fit: its runs here pass --stage_x always, the flag that revision's
# behaviour became) or CALL=2 (the staging rule ChooseGemvStageX, rmsnorm input, one part).
# Bundle (sm_90a builds; binaries stripped):
#   /work/shared/tools/device-bundle /work/main/.device/w4gemv build-sm90/bin/pkv-bench \
#     build-sm90/bin/gemv_device_test build-sm90/bin/quantized_backend_device_test BASE/pkv-bench-base
#   cp bench/gemv/w4gemv_device_run.sh /work/main/.device/w4gemv/go.sh; git rev-parse HEAD > .../REVISION
#   cd /work/main/.device && XZ_OPT="-9 -T2" tar -cJf w4gemv.tar.xz w4gemv
# On the GPU machine, in the repository root (carry .device/w4gemv.tar.xz):
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/w4gemv.tar.xz && bash /tmp/pkv/w4gemv/go.sh
# Writes summary.txt and results.tgz under $OUT.
set -u
TOP=${OUT:-/tmp/out}; OUT=$TOP/r; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$TOP/summary.txt
BUDGET_S=${BUDGET_S:-300}
{
  echo "== $(date -u +%FT%TZ) revision $(cat "$B/REVISION" 2>/dev/null) base $(cat "$B/BASE_REVISION" 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv
} >> "$L" 2>&1
# step NAME NEED_S TIMEOUT_S CMD...: runs CMD (output to $OUT/NAME) if NEED_S seconds remain.
step() {
  local name=$1 need=$2 limit=$3; shift 3
  if (( SECONDS + need > BUDGET_S )); then echo "== $name skipped at ${SECONDS}s" >> "$L"; return; fi
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name" 2>&1
  echo "== $name rc $? in $((SECONDS - t0))s (at ${SECONDS}s)" >> "$L"
}
G="gemv --dtype bf16 --iters 100"
if [ "${CALL:-1}" = 1 ]; then
step gemv_new.md 25 60 "$R" pkv-bench $G --stage_x always --out "$OUT/gemv_new.tsv"
step gemv_base.md 15 40 "$R" pkv-bench-base $G --tokens 1,8 --out "$OUT/gemv_base.tsv"
step gemv_new_nostage.md 15 40 "$R" pkv-bench $G --tokens 1,8 --x_stage_max_bytes 0 \
  --out "$OUT/gemv_new_nostage.tsv"
step gemv_new_pf4.md 15 40 "$R" pkv-bench $G --tokens 1,8 --prefetch_steps 4 \
  --out "$OUT/gemv_new_pf4.tsv"
else  # call 2: the staging rule (auto), rmsnorm input staged or not, one part for o
step gemv_auto.md 25 60 "$R" pkv-bench $G --out "$OUT/gemv_auto.tsv"
step gemv_base.md 15 40 "$R" pkv-bench-base $G --tokens 1,8 --out "$OUT/gemv_base.tsv"
step gemv_rms_always.md 25 60 "$R" pkv-bench $G --input rmsnorm --stage_x always \
  --out "$OUT/gemv_rms_always.tsv"
step gemv_rms_never.md 25 60 "$R" pkv-bench $G --input rmsnorm --stage_x never \
  --out "$OUT/gemv_rms_never.tsv"
step gemv_parts1.md 15 40 "$R" pkv-bench $G --tokens 1,8 --parts 1 --out "$OUT/gemv_parts1.tsv"
fi
E="e2e --shapes llama3-8b --quant awq --prompts= --steps 12 --warmup 2
   --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 --variants cublas,fused+pdl"
step e2e_new.txt 35 70 "$R" pkv-bench $E --out "$OUT/e2e_new.tsv"
step e2e_base.txt 35 70 "$R" pkv-bench-base $E --out "$OUT/e2e_base.tsv"
step tests.txt 60 150 "$R" gemv_device_test --gtest_brief=1
step qbackend_tests.txt 20 90 "$R" quantized_backend_device_test --gtest_brief=1
if [ "${CALL:-1}" = 1 ]; then
step gemv_new_fp16.md 12 30 "$R" pkv-bench gemv --dtype fp16 --iters 100 --tokens 1,8 \
  --stage_x always --out "$OUT/gemv_new_fp16.tsv"
step gemv_base_fp16.md 12 30 "$R" pkv-bench-base gemv --dtype fp16 --iters 100 --tokens 1,8 \
  --out "$OUT/gemv_base_fp16.tsv"
step gemv_new_r2.md 12 30 "$R" pkv-bench $G --tokens 1,8 --stage_x always \
  --out "$OUT/gemv_new_r2.tsv"
else
step gemv_auto_fp16.md 12 30 "$R" pkv-bench gemv --dtype fp16 --iters 100 --tokens 1,8 \
  --out "$OUT/gemv_auto_fp16.tsv"
fi
grep -hE "FAILED|PASSED|tests ran" "$OUT"/tests.txt "$OUT"/qbackend_tests.txt >> "$L" 2>/dev/null
grep -A12 "decode step time and byte-floor" "$OUT"/e2e_*.txt >> "$L" 2>/dev/null
cp "$L" "$OUT/"
tar -C "$TOP" -czf "$TOP/results.tgz" r && rm -rf "$OUT"
cat "$L"
