#!/usr/bin/env bash
# One device call of the FP8 KV work (issue 16): the FP8 and 16-bit decode device tests, then
# `pkv-bench kernels` on the held-out grid with fp16 and fp8_e4m3 KV side by side. Bundle:
#   /work/shared/tools/device-bundle .device/fp8kv build-cuda/bin/decode_fp8_device_test \
#     build-cuda/bin/decode_attention_device_test build-cuda/bin/pkv-bench
#   cp bench/kernels/device_run_fp8kv.sh bench/traces/heldout-20260623.tsv .device/fp8kv/
#   git rev-parse HEAD > .device/fp8kv/REVISION; tar -C .device -cJf .device/fp8kv.tar.xz fp8kv
# On the GPU machine: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/fp8kv.tar.xz &&
#   /tmp/pkv/fp8kv/device_run_fp8kv.sh        (writes tests_*.txt, kernels.tsv/.md, log.txt)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
L=$OUT/log.txt
{
  echo "== $(date -u +%FT%TZ) revision $(cat $B/REVISION 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
} >> "$L" 2>&1
timeout 100 "$R" decode_fp8_device_test --gtest_brief=1 > "$OUT/tests_fp8.txt" 2>&1
echo "== decode_fp8_device_test rc $?" >> "$L"
timeout 40 "$R" decode_attention_device_test --gtest_brief=1 \
  --gtest_filter='*Awkward*:*HeadDims*:*KernelConfigs*' > "$OUT/tests_16bit.txt" 2>&1
echo "== decode_attention_device_test (subset) rc $?" >> "$L"
timeout 80 "$R" pkv-bench kernels --trace "$B/heldout-20260623.tsv" --kv_dtype auto,fp8_e4m3 \
  --routes workqueue,persistent --iters 30 --wall_iters 3 --out "$OUT/kernels.tsv" \
  > "$OUT/kernels.md" 2>&1
echo "== bench kernels rc $?" >> "$L"
cat "$L"; tail -5 "$OUT/tests_fp8.txt"; tail -3 "$OUT/tests_16bit.txt"; tail -5 "$OUT/kernels.md"
