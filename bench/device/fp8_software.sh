#!/usr/bin/env bash
# Issue 16's consumer-card question on the H200: what the sm_80/86 FP8 conversion (bit moves, no
# cvt.e4m3x2) costs and whether it is correct on a real GPU. The `sw` bundle is built with
# -DPKV_FP8_SOFTWARE_CVT=ON (build-sw: sm_90a, every FP8 KV conversion takes the sm_80/86 path);
# the `hw` one is the normal sm_90a build of the same revision.
#   1. decode_fp8_device_test and fp8_kv_device_test of the sw build (every route, E4M3/E5M2,
#      against the CPU reference of the same quantized KV);
#   2. pkv-bench kernels, held-out grid, bf16 queries, FP8 E4M3 pages, hw and sw side by side
#      (16-bit KV in the same call as the reference).
# Build machine: device-bundle build-sw's pkv-bench and the two tests into .device/sw, build-sm90's
# pkv-bench into .device/hw; strip; tar+xz both into .device/swhw.tar.xz.
# Device call: carry [".device/swhw.tar.xz"], bash bench/device/fp8_software.sh
set -u
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/swhw.tar.xz
OUT=${OUT:-/tmp/out}; S=$OUT/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
SW=/tmp/pkv/sw/run; HW=/tmp/pkv/hw/run
echo "revision $(cat /tmp/pkv/sw/REVISION)" > "$S"
el "device tests, software conversion build"
for tl in decode_fp8_device_test:90 fp8_kv_device_test:60; do
  IFS=: read -r t c <<< "$tl"
  timeout "$c" "$SW" "$t" --gtest_brief=1 > "$OUT/$t.txt" 2>&1
  echo "rc=$? $t $(grep -hE '^\[  (PASSED|FAILED) ' "$OUT/$t.txt" | tr '\n' ' ')" >> "$S"
done
K="--trace bench/traces/heldout-20260623.tsv --routes workqueue,persistent,split --iters 30 --wall_iters 3 --dtype bf16 --configs default"
el "kernels hw (cvt.e4m3x2) with 16-bit reference"
timeout 120 "$HW" pkv-bench kernels $K --kv_dtype auto,fp8_e4m3 --out "$OUT/kernels_hw.tsv" > "$OUT/kernels_hw.md" 2>&1
echo "rc=$? kernels hw" >> "$S"
el "kernels sw (bit moves)"
timeout 100 "$SW" pkv-bench kernels $K --kv_dtype fp8_e4m3 --nofloor --out "$OUT/kernels_sw.tsv" > "$OUT/kernels_sw.md" 2>&1
echo "rc=$? kernels sw" >> "$S"
el done
cat "$S"
