#!/usr/bin/env bash
# Steps of <= 8 decode rows plan no split under 64 KB of K+V (PlanOptions::min_split_bytes; 2026-12-03,
# tenth session): base (main e6a5190, pkv-bench-base) vs branch minsplit, three interleaved rounds.
# Bundle .device/minsplit: pkv-bench, pkv-bench-base, cuda_backend_device_test.
# Call: carry [".device/minsplit.tar.xz"], `bash bench/device/minsplit.sh` (~3 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack minsplit
RD=$OUT/r; mkdir -p "$RD"
parallel_tests "$RD" cuda_backend_device_test:200
pack
L1=(--shapes llama3-1b --variants fused+pdl --temperature 1 --kv_cache_dtype auto,fp8_e4m3
    --decode_lines bucketed-B1-N1024,bucketed-B1-N4096,bucketed-B1-N16384,bimodal-B2,bucketed-B4-N4096,bucketed-B8-N4096)
L8=(--shapes llama3-8b --variants fused+pdl,pdl --temperature 1 --kv_cache_dtype auto,fp8_e4m3
    --decode_lines bucketed-B1-N4096,bucketed-B1-N16384,bucketed-B8-N4096)
for i in 1 2 3; do
  for bin in $(ab_bins $i); do
    e2e_line "$R" $bin "1b_${bin}_$i" "$RD" "${L1[@]}"
    e2e_line "$R" $bin "8b_${bin}_$i" "$RD" "${L8[@]}"
  done
  pack
done
el done
