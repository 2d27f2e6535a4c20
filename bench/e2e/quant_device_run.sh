#!/usr/bin/env bash
# One device call of the quantized CUDA backend (issue 13, NAME=quantcuda): the quantized-backend
# device tests, a dense regression slice of cuda_backend_device_test, then `pkv-bench e2e` on the
# 8B shape dense and its AWQ (4-bit) and FP8 twins side by side: B=1 at a 4k context and bimodal
# B=64, cuBLAS and fused+PDL, and one 2048-token prefill (the dequantize-then-GEMM path).
# Bundle (from the worktree, CUDA on, sm_90a):
#   /work/shared/tools/device-bundle /work/main/.device/quantcuda \
#     build/bin/quantized_backend_device_test build/bin/cuda_backend_device_test build/bin/pkv-bench
#   cp bench/e2e/quant_device_run.sh bench/traces/heldout-20260623.tsv /work/main/.device/quantcuda/
#   git rev-parse HEAD > /work/main/.device/quantcuda/REVISION
#   tar -C /work/main/.device -cJf /work/main/.device/quantcuda.tar.xz quantcuda
# On the GPU machine (carry .device/quantcuda.tar.xz):
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/quantcuda.tar.xz &&
#   /tmp/pkv/quantcuda/quant_device_run.sh
# Writes log.txt, quant_tests.txt, dense_tests.txt, e2e.tsv and e2e.txt under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$OUT/log.txt
{
  echo "== $(date -u +%FT%TZ) revision $(cat $B/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
} >> "$L" 2>&1
timeout 80 "$R" quantized_backend_device_test --gtest_brief=1 > "$OUT/quant_tests.txt" 2>&1
echo "== quantized_backend_device_test rc $?" >> "$L"
timeout 50 "$R" cuda_backend_device_test --gtest_brief=1 \
  --gtest_filter='*Decode64StepsGreedy*:*BatchedDecodeAcrossBuckets*' > "$OUT/dense_tests.txt" 2>&1
echo "== cuda_backend_device_test (slice) rc $?" >> "$L"
timeout 140 "$R" pkv-bench e2e --shapes llama3-8b --quant awq,fp8 \
  --trace "$B/heldout-20260623.tsv" --decode_lines bucketed-B1-N4096,bimodal-B64 \
  --variants cublas,fused+pdl --prompts 2048 --steps 12 --warmup 2 --out "$OUT/e2e.tsv" \
  > "$OUT/e2e.txt" 2>&1
echo "== pkv-bench e2e rc $?" >> "$L"
cat "$L"; tail -5 "$OUT/quant_tests.txt"; tail -3 "$OUT/dense_tests.txt"; cat "$OUT/e2e.txt" | tail -40
