#!/usr/bin/env bash
# Decode attention in the PDL chain, second call (2026-12-03 ninth session): without the early
# PdlTrigger (the first call's fused steps were 36% slower with it). Bundles (build-sm90):
#   .device/next9.tar.xz     main 9804647 (base)
#   .device/attnpdl2.tar.xz  pkv-bench (attention PDL in both paths), pkv-bench-fo (fused path
#     only), the decode/backend device tests of the first binary
# Call: carry [".device/next9.tar.xz", ".device/attnpdl2.tar.xz"], `bash bench/device/attnpdl2.sh`.
set -u
source "$(dirname "$0")/common.sh"
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/next9.tar.xz
BASE=/tmp/pkv/next9/run
unpack attnpdl2
A=$OUT/r; mkdir -p "$A"
el "attnpdl2 ($(cat $B/REVISION)) vs base $(cat /tmp/pkv/next9/REVISION)"
parallel_tests "$A" cuda_backend_device_test:300 decode_attention_device_test:300 \
  decode_fp8_device_test:300
pack
e2e() {  # BIN TAG ARGS... (BIN base: the base bundle's pkv-bench)
  local bin=$1 tag=$2; shift 2
  if [ "$bin" = base ]; then e2e_line "$BASE" pkv-bench "$tag" "$A" "$@"
  else e2e_line "$R" "$bin" "$tag" "$A" "$@"; fi
}
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64
   --variants fused+pdl,pdl,cublas --temperature 1)
for i in 1 2; do
  e2e base base$i "${L[@]}"; e2e pkv-bench v2_$i "${L[@]}"; e2e pkv-bench-fo fo_$i "${L[@]}"; pack
done
Q=(--shapes llama3-8b --decode_lines bucketed-B1-N4096 --variants fused+pdl --temperature 1)
for x in base pkv-bench; do
  e2e $x ${x}_fp8kv "${Q[@]}" --kv_cache_dtype fp8_e4m3
  e2e $x ${x}_awq "${Q[@]}" --quant awq
done
el done
pack
cat "$S"
