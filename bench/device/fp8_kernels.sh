#!/usr/bin/env bash
# GPU-machine call for issue 16's kernel bars: FP8 KV decode after the bf16 conversion rewrite
# (fp8_convert.cuh Fp8x2ToBf16x2), measured over kernel configs (warps, stages) side by side with
# 16-bit KV on the held-out grid, fp16 and bf16 queries; the previous binary (pkv-bench-old, the
# four-conversion bf16 path) on the same grid for bf16 in the same call.
#   1. device tests: decode_fp8_device_test, fp8_kv_device_test;
#   2. pkv-bench kernels --kv_dtype auto,fp8_e4m3 --configs w4s3,w4s6,w8s3 (fp16, bf16).
# Build machine: device-bundle into .device/fk (pkv-bench from build-sm90, pkv-bench-old from the
# previous revision), strip, tar+xz. Device call: carry [".device/fk.tar.xz"],
# bash bench/device/fp8_kernels.sh
set -u
source "$(dirname "$0")/common.sh"
unpack fk
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; date -u; } > "$S" 2>&1

el "device tests"
run_device_tests decode_fp8_device_test:90 fp8_kv_device_test:90

K="--trace bench/traces/heldout-20260623.tsv --kv_dtype auto,fp8_e4m3 --routes workqueue,persistent,split --iters 30 --wall_iters 3"
for dt in fp16 bf16; do
  el "kernels $dt"
  timeout 150 "$R" pkv-bench kernels $K --dtype $dt --configs w4s3,w4s6,w8s3 \
    --out "$OUT/kernels_$dt.tsv" > "$OUT/kernels_$dt.md" 2>&1
  echo "rc=$? kernels $dt" >> "$S"
done
el "kernels bf16, previous binary"
timeout 90 "$R" pkv-bench-old kernels $K --dtype bf16 --configs w4s3 --floor=false \
  --out "$OUT/kernels_bf16_old.tsv" > "$OUT/kernels_bf16_old.md" 2>&1
echo "rc=$? kernels bf16 old" >> "$S"
el done
cat "$S"
