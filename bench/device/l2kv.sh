#!/usr/bin/env bash
# 2026-12-03 eleventh session. Branch `l2kv`: a graph-sized PDL decode-attention launch prefetches
# each CTA's first item's first K/V pages into L2 (cp.async.bulk.prefetch) before its dependency
# wait, while the q/k/v projection finishes. Prediction: attention's post-wait K/V round trip
# and part of its stream leave the layer's chain: 8B B=1 -1..-3% (up to ~4 us a layer of 16 MB
# streamed in the qkv tail), 1B B=1 -2..-4% (its qkv leaves SM slots free, so attention CTAs
# are resident early); B=8 alike; B=64 (no attention PDL) unchanged.
# Bundle .device/l2kv: the branch's pkv-bench, pkv-worker, pkv-router, pkv, pkv-make-model and
# device tests; main's pkv-bench-base and pkv-worker-base (from .device/floor: same kernel code
# as main). Call: carry [".device/l2kv.tar.xz"], `bash bench/device/l2kv.sh` (~6 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack l2kv
RD=$OUT/r; mkdir -p "$RD"
el "l2kv $(cat $B/REVISION)"
parallel_tests "$RD/tests" cuda_backend_device_test:240 decode_attention_device_test:240 \
  decode_fp8_device_test:240 fp8_kv_device_test:240
# The served rows run 4097-4352 tokens: one e2e line at 4224 beside the 4096 one.
TR=/tmp/trace.tsv; cp bench/traces/heldout-20260623.tsv $TR
printf 'served-B1-N4224\tbucketed\t1\t4224\n' >> $TR
L=(--trace $TR --shapes llama3-8b,llama3-1b --variants fused+pdl,pdl --temperature 1
   --decode_lines bucketed-B1-N4096,served-B1-N4224,uniform-B1,bimodal-B2,bucketed-B8-N4096)
for i in 1 2; do
  for bin in $(ab_bins $i); do e2e_line "$R" $bin "${bin}_$i" "$RD" "${L[@]}"; done
  pack
done
for bin in $(ab_bins 1); do
  e2e_line "$R" $bin "${bin}_awq" "$RD" --shapes llama3-8b --quant awq --variants fused+pdl \
    --temperature 1 --decode_lines bucketed-B1-N4096
done
pack
n=0
for m in "1b llama3-1b" "8b llama3-8b"; do
  read -r tag shape <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$RD/make_$tag.log" 2>&1
  for w in pkv-worker-base pkv-worker pkv-worker-base pkv-worker; do
    WORKER_BIN=$w serve_model "${tag}_${w}_$((++n))" /tmp/m-$tag "$RD"
  done
  rm -rf /tmp/m-$tag; pack
done
el done
cat "$S"
