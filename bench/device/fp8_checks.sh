#!/usr/bin/env bash
# GPU-machine call closing the 2026-12-02 (third) session: the FP8 KV cache end to end (issue 16)
# after the CPU-side (worker flag, CPU oracle) and CUDA-side branches were merged.
#   1. device tests: fp8_kv_device_test (prefill over FP8 pages, the KV write's codes, the CUDA
#      backend with FP8 vs 16-bit KV), decode_fp8_device_test, quantized_backend_device_test, and
#      the 16-bit cuda_backend_device_test / prefill tests as regressions;
#   2. one CUDA worker with --kv_cache_dtype=fp8_e4m3 behind a router: `pkv info` reports the
#      dtype, a served benchmark completes, the pool has twice the pages of an auto worker;
#   3. pkv-bench e2e, 8B: FP8 vs bf16 KV (bimodal B=64, B=1 at 4k), capacity in tokens.
# Build machine: device-bundle into .device/f8, strip, tar+xz. Device call: carry
# [".device/f8.tar.xz"], bash bench/device/fp8_checks.sh
set -u
source "$(dirname "$0")/common.sh"
unpack f8
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; date -u; } > "$S" 2>&1

el "device tests"
run_device_tests fp8_kv_device_test:90 decode_fp8_device_test:60 \
  quantized_backend_device_test:60 prefill_attention_device_test:40

el "FP8 KV worker behind a router"
C=$OUT/cluster.log
timeout 100 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b >> "$C" 2>&1
for dtype in auto fp8_e4m3; do
  start_workers /tmp/m1b 1 --kv_cache_dtype=$dtype --kv_memory_fraction=0.3
  start_router
  {
    echo "--- kv_cache_dtype=$dtype"
    "$R" pkv info --addr 127.0.0.1:50061 2>&1 | grep -iE "kv|pages|dtype"
    timeout 60 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt --input_len 256 \
      --output_len 32 --request_rate 50 --num_requests 200 --metrics_url 127.0.0.1:9100 \
      --progress=false 2>&1 | grep -E "TTFT|TPOT|requests|throughput" | head -6
    grep -E "KV pages|kv cache" /tmp/w0.log | head -2
  } >> "$C" 2>&1
  stop_all
done
grep -E "^---|dtype|pages|TTFT|completed|failed" "$C" | head -30 >> "$S"

el "e2e 8B: FP8 vs bf16 KV"
timeout 150 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
  --decode_lines bimodal-B64,bucketed-B1-N4096 --variants cublas --prompts 2048 \
  --kv_cache_dtype auto,fp8_e4m3 --out "$OUT/e2e_fp8.tsv" > "$OUT/e2e_fp8.log" 2>&1
echo "e2e rc=$?" >> "$S"
grep -E "KV pool|decode step time|llama3-8b" "$OUT/e2e_fp8.log" | head -12 >> "$S"
el done
cat "$S"
