#!/usr/bin/env bash
# One device call of the FP8 KV cache in the CUDA backend (issue 16 step 4): the FP8 device tests
# (prefill over FP8 pages, the RoPE+KV write's codes, the backend FP8 vs 16-bit KV), 16-bit
# regressions of the kernels this step touched, then `pkv-bench e2e` for llama3-8b with bf16 and
# fp8_e4m3 KV side by side. Bundle (build dir with CUDA on):
#   /work/shared/tools/device-bundle .device/fp8cuda build/bin/fp8_kv_device_test \
#     build/bin/prefill_attention_device_test build/bin/cuda_backend_device_test build/bin/pkv-bench
#   strip --strip-debug .device/fp8cuda/bin/*; cp bench/e2e/fp8cuda_device_run.sh .device/fp8cuda/
#   git rev-parse HEAD > .device/fp8cuda/REVISION; tar -C .device -cJf .device/fp8cuda.tar.xz fp8cuda
# GPU machine, repo root (policies/ and bench/traces/ are read from there):
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/fp8cuda.tar.xz && /tmp/pkv/fp8cuda/fp8cuda_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$OUT/log.txt
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$L"; }
{
  echo "== $(date -u +%FT%TZ) revision $(cat $B/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
} >> "$L" 2>&1
timeout 70 "$R" fp8_kv_device_test --gtest_brief=1 > "$OUT/tests_fp8.txt" 2>&1
el "fp8_kv_device_test rc $?"
timeout 20 "$R" prefill_attention_device_test --gtest_brief=1 > "$OUT/tests_prefill16.txt" 2>&1
el "prefill_attention_device_test rc $?"
timeout 30 "$R" cuda_backend_device_test --gtest_brief=1 \
  --gtest_filter='*PrefillChunked*:*MixedBatch*:*Decode64*' > "$OUT/tests_backend16.txt" 2>&1
el "cuda_backend_device_test (subset) rc $?"
timeout 100 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
  --decode_lines bimodal-B64,uniform-B1 --variants cublas --prompts 2048 \
  --kv_cache_dtype auto,fp8_e4m3 --out "$OUT/e2e.tsv" > "$OUT/e2e.log" 2>&1
el "bench e2e rc $?"
cat "$L"; grep -E "FAILED|PASSED|\[fp8" "$OUT"/tests_*.txt | head -40; tail -25 "$OUT/e2e.log"
