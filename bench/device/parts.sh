#!/usr/bin/env bash
# ChooseGemvParts splits unevenly spread tile counts (1B q/k/v: 192 tiles on 132 SMs -> 2 parts)
# (2026-12-03 ninth session). Bundle .device/parts: pkv-bench-base (3f456de = final9), pkv-bench,
# cuda_backend_device_test, gemv_device_test (new). Call: carry [".device/parts.tar.xz"],
# `bash bench/device/parts.sh` (~1 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack parts
RD=$OUT/r; mkdir -p "$RD"
parallel_tests "$RD" cuda_backend_device_test:120 'gemv_device_test:120:*Rope*:*Chained*:*Store*'
pack
L=(--shapes llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 --variants fused+pdl
   --temperature 1 --quant awq)
for i in 1 2; do
  e2e_line "$R" pkv-bench-base base_$i "$RD" "${L[@]}"
  e2e_line "$R" pkv-bench new_$i "$RD" "${L[@]}"
  pack
done
el done
cat "$S"
