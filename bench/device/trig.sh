#!/usr/bin/env bash
# GEMV early trigger only when the next kernel fills its slots (2026-12-03 ninth session).
# Bundle .device/trig: pkv-bench-base (3f456de, = final9), pkv-bench-rule (branch trig: o, gate/up
# and down trigger early only when the next GEMV has a CTA for every slot), pkv-bench-none (no
# fused GEMV triggers early), cuda_backend_device_test (rule).
# Call: carry [".device/trig.tar.xz"], `bash bench/device/trig.sh` (~2 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack trig
RD=$OUT/r; mkdir -p "$RD"
el "trig"
parallel_tests "$RD" cuda_backend_device_test:200
pack
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
   --variants fused+pdl --temperature 1 --quant awq)
for i in 1 2; do
  for v in base rule none; do e2e_line "$R" pkv-bench-$v ${v}_$i "$RD" "${L[@]}"; done
  pack
done
el done
pack
cat "$S"
