#!/usr/bin/env bash
# One device call of the quantized-weight GEMM (issue 13, NAME=w4gemm): its device tests (the
# qgemm cases of gemv_device_test, quantized_backend_device_test with the 64-row step), then
# `pkv-bench qgemm` (qgemm vs dequantize + cuBLAS vs bf16 cuBLAS, 8B shapes, 16..256 tokens, with
# a split-factor sweep) and `pkv-bench e2e` on the 8B shape, dense next to its AWQ and FP8 twins:
# bimodal B=64 (cuBLAS path: now the qgemm for packed weights) and B=1 at a 4k context (fused).
# Bundle (from the worktree, CUDA on, sm_90a):
#   /work/shared/tools/device-bundle /work/main/.device/w4gemm \
#     build/bin/gemv_device_test build/bin/quantized_backend_device_test build/bin/pkv-bench
#   cp bench/gemv/qgemm_device_run.sh bench/traces/heldout-20260623.tsv /work/main/.device/w4gemm/
#   git rev-parse HEAD > /work/main/.device/w4gemm/REVISION
#   tar -C /work/main/.device -cJf /work/main/.device/w4gemm.tar.xz w4gemm
# On the GPU machine (carry .device/w4gemm.tar.xz):
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/w4gemm.tar.xz &&
#   /tmp/pkv/w4gemm/qgemm_device_run.sh
# PKV_SWEEP (default 1,2,4,8,16) is the split sweep, PKV_VARIANTS the memory-pipeline variants
# (QGemmArgs); PKV_E2E=0 skips the e2e run.
# Writes log.txt, tests.txt, quant_tests.txt, qgemm.md/.tsv, e2e.txt/.tsv under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$OUT/log.txt
{
  echo "== $(date -u +%FT%TZ) revision $(cat $B/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
} >> "$L" 2>&1
timeout 100 "$R" gemv_device_test --gtest_brief=1 --gtest_filter='*QGemm*' > "$OUT/tests.txt" 2>&1
echo "== gemv_device_test (qgemm) rc $?" >> "$L"
timeout 80 "$R" quantized_backend_device_test --gtest_brief=1 > "$OUT/quant_tests.txt" 2>&1
echo "== quantized_backend_device_test rc $?" >> "$L"
timeout 90 "$R" pkv-bench qgemm --qgemm_parts "${PKV_SWEEP-1,2,4,8,16}" --iters 10 \
  --qgemm_variants "${PKV_VARIANTS-all,l2,stagger,pf4,ring2,ring4}" \
  --out "$OUT/qgemm.tsv" > "$OUT/qgemm.md" 2>&1
echo "== pkv-bench qgemm rc $?" >> "$L"
if [ "${PKV_E2E:-1}" = 1 ]; then
  timeout 150 "$R" pkv-bench e2e --shapes llama3-8b --quant awq,fp8 \
    --trace "$B/heldout-20260623.tsv" --decode_lines bucketed-B1-N4096,bimodal-B64 \
    --variants cublas,fused+pdl --prompts 2048 --steps 12 --warmup 2 --out "$OUT/e2e.tsv" \
    > "$OUT/e2e.txt" 2>&1
  echo "== pkv-bench e2e rc $?" >> "$L"
fi
cat "$L"; tail -5 "$OUT/tests.txt"; tail -5 "$OUT/quant_tests.txt"; cat "$OUT/qgemm.md" | head -60
tail -40 "$OUT/e2e.txt" 2>/dev/null
