#!/usr/bin/env bash
# GPU-machine call for issue 16's kernel bars (2026-12-02, fourth session): FP8 KV decode with
# fp16 MMAs for bf16 queries too and the FP8 default kernel config (decode::DefaultKernelConfig),
# side by side with 16-bit KV on the held-out grid, fp16 and bf16 queries; then pkv-bench e2e 8B
# with bf16 vs FP8 KV (steps, capacity, greedy logprob drift over 4 prompts).
#   1. device tests: decode_fp8_device_test, fp8_kv_device_test;
#   2. pkv-bench kernels --kv_dtype auto,fp8_e4m3 --configs default (+ w4s3/w8s3 for FP8);
#   3. pkv-bench e2e --shapes llama3-8b --kv_cache_dtype auto,fp8_e4m3.
# Build machine: device-bundle into .device/fk (pkv-bench and the tests from build-sm90), strip,
# tar+xz. Device call: carry [".device/fk.tar.xz"], bash bench/device/fp8_kernels.sh
set -u
source "$(dirname "$0")/common.sh"
unpack fk
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; date -u; } > "$S" 2>&1

el "device tests"
run_device_tests decode_fp8_device_test:90 fp8_kv_device_test:90

K="--trace bench/traces/heldout-20260623.tsv --routes workqueue,persistent,split --iters 30 --wall_iters 3"
for dt in fp16 bf16; do
  el "kernels $dt"
  timeout 100 "$R" pkv-bench kernels $K --dtype $dt --kv_dtype auto,fp8_e4m3 --configs default \
    --out "$OUT/kernels_$dt.tsv" > "$OUT/kernels_$dt.md" 2>&1
  echo "rc=$? kernels $dt" >> "$S"
done
el "kernels bf16 FP8 w4s3 (the previous FP8 config)"
timeout 60 "$R" pkv-bench kernels $K --dtype bf16 --kv_dtype fp8_e4m3 --configs w4s3 --nofloor \
  --out "$OUT/kernels_bf16_w4s3.tsv" > "$OUT/kernels_bf16_w4s3.md" 2>&1
echo "rc=$? kernels bf16 w4s3" >> "$S"

el "e2e 8B: FP8 vs bf16 KV"
timeout 200 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
  --decode_lines bimodal-B64,bucketed-B1-N4096,uniform-B1,uniform-B8 --variants cublas --prompts 2048 \
  --kv_cache_dtype auto,fp8_e4m3 --out "$OUT/e2e_fp8.tsv" > "$OUT/e2e_fp8.log" 2>&1
echo "e2e rc=$?" >> "$S"
grep -E "KV pool|drift|step|llama3-8b" "$OUT/e2e_fp8.log" | head -20 >> "$S"
el done
cat "$S"
