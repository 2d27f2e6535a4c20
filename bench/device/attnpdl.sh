#!/usr/bin/env bash
# Decode attention inside the layer's PDL chain (issue 14; 2026-12-03 ninth session), after the
# prepared next9 phases. Bundles (build box, build-sm90 = sm_90a):
#   .device/next9.tar.xz    main 9804647 (base): see next9.sh
#   .device/attnpdl.tar.xz  device-bundle .device/attnpdl pkv-bench cuda_backend_device_test
#     decode_attention_device_test decode_fp8_device_test; REVISION = the branch's commit
# Call: carry [".device/next9.tar.xz", ".device/qgemm2b.tar.xz", ".device/attnpdl.tar.xz"],
#   command `bash bench/device/attnpdl.sh` (next9's ~4 min, then ~3 min).
set -u
NEXT9=${NEXT9:-1}
if [ "$NEXT9" = 1 ]; then bash "$(dirname "$0")/next9.sh" > /dev/null 2>&1; fi
source "$(dirname "$0")/common.sh"
BASE=/tmp/pkv/next9/run
[ -x "$BASE" ] || { mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/next9.tar.xz; }
unpack attnpdl
RD=$OUT/r; mkdir -p "$RD/attnpdl"; A=$RD/attnpdl
el "A. attnpdl $(cat $B/REVISION) vs base $(cat /tmp/pkv/next9/REVISION)"
el "A1. device tests"
parallel_tests "$A" cuda_backend_device_test:300 decode_attention_device_test:300 \
  decode_fp8_device_test:300
pack
e2e() { local run=$1 tag=$2; shift 2; e2e_line "$run" pkv-bench "$tag" "$A" "$@"; }  # RUN TAG ARGS...
el "A2. e2e base vs new, alternating (temperature 1, as served)"
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64
   --variants fused+pdl,fused+pdl+pf2,pdl,cublas --temperature 1)
for i in 1 2; do
  e2e "$BASE" base$i "${L[@]}"; e2e "$R" new$i "${L[@]}"; pack
done
el "A3. FP8 KV and AWQ, 8B"
Q=(--shapes llama3-8b --decode_lines bucketed-B1-N4096,bimodal-B64 --variants fused+pdl,pdl --temperature 1)
e2e "$BASE" base_fp8kv "${Q[@]}" --kv_cache_dtype fp8_e4m3
e2e "$R" new_fp8kv "${Q[@]}" --kv_cache_dtype fp8_e4m3
e2e "$BASE" base_awq "${Q[@]}" --quant awq
e2e "$R" new_awq "${Q[@]}" --quant awq
el done
pack
cat "$S"
