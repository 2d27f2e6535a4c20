#!/usr/bin/env bash
# Closing call of the 2026-12-03 tenth session: main's head (small steps' split floor in K+V
# elements; deep GEMV batches for 8B o/down) beside the ninth session's head (e6a5190), served
# figures. Bundles (build box, build-sm90 = sm_90a):
#   .device/b1attn.tar.xz   base e6a5190 (pkv-bench; the ninth session's head code)
#   .device/final10.tar.xz  device-bundle .device/final10 pkv-bench pkv-worker pkv-router pkv
#     pkv-make-model decode_attention_device_test decode_fp8_device_test gemv_device_test
#     cuda_backend_device_test quantized_backend_device_test fp8_kv_device_test; REVISION
# Call: carry [".device/b1attn.tar.xz", ".device/final10.tar.xz"], `bash bench/device/final10.sh`
#   (~6 min warm). Phases re-pack results after each.
set -u
source "$(dirname "$0")/common.sh"
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/b1attn.tar.xz
BASE=/tmp/pkv/b1attn/run
unpack final10
RD=$OUT/r; mkdir -p "$RD/tests"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "revision $(cat $B/REVISION) vs base $(cat /tmp/pkv/b1attn/REVISION 2>/dev/null)"; } > "$S"
el "1. device tests (parallel)"
parallel_tests "$RD/tests" cuda_backend_device_test:240 decode_attention_device_test:240 \
  decode_fp8_device_test:240 gemv_device_test:240 quantized_backend_device_test:240 \
  fp8_kv_device_test:240
pack
el "2. e2e base vs new (temperature 1)"
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64
   --variants fused+pdl,pdl --temperature 1)
Q=(--shapes llama3-8b --quant awq,fp8 --decode_lines bucketed-B1-N4096 --variants fused+pdl
   --temperature 1)
e2e_line "$BASE" pkv-bench base "$RD" "${L[@]}"
e2e_line "$R" pkv-bench new "$RD" "${L[@]}"
e2e_line "$BASE" pkv-bench base_q "$RD" "${Q[@]}"
e2e_line "$R" pkv-bench new_q "$RD" "${Q[@]}"
pack
el "3. served (router + one worker, 4096-token prompts, 256 tokens, concurrency 1)"
for m in "1b llama3-1b" "8b llama3-8b"; do
  read -r tag shape <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$RD/make_$tag.log" 2>&1
  echo "rc=$? make $tag" >> "$S"
  serve_model "$tag" /tmp/m-$tag "$RD"
  rm -rf /tmp/m-$tag; pack
done
el done
cat "$S"
