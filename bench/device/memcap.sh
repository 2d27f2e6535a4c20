#!/usr/bin/env bash
# Issue 13's memory bar, for a GPU-machine call (NOT RUN YET: written 2026-12-02 without device
# time left): an 8B 4-bit worker limited to what a 12 GB card (RTX 3060) leaves after its CUDA
# context serves a 16k-token context, and with the FP8 KV cache 32k.
#   1. pkv-bench e2e --quant awq --gpu_memory_limit_gib 11.5: the KV pool's tokens, bf16 vs FP8 KV;
#   2. a worker (--gpu_memory_limit_gib 11.5, --max_model_len 16384 / 32768) behind a router, one
#      document of 16000 / 32000 tokens plus a 16-token question (pkv bench serve long_doc), 16
#      tokens generated; `pkv info` and the log show
#      the pool; nvidia-smi's per-process memory is recorded next to it.
# Build machine: device-bundle pkv-bench pkv-worker pkv-router pkv pkv-make-model into .device/mc,
# strip, tar+xz. Device call: carry [".device/mc.tar.xz"], bash bench/device/memcap.sh
set -u
source "$(dirname "$0")/common.sh"
unpack mc
# Few files come back from a call: everything but the summary goes into results.tgz, re-packed
# after each phase so a timeout still returns what was measured.
RD=$OUT/r; mkdir -p "$RD"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; date -u; } > "$S" 2>&1

el "e2e 8B AWQ within 11.5 GiB"
timeout 150 "$R" pkv-bench e2e --shapes llama3-8b --quant awq --gpu_memory_limit_gib 11.5 \
  --decode_lines bucketed-B1-N4096 --variants fused+pdl --prompts "" --drift_prompts 0 \
  --kv_cache_dtype auto,fp8_e4m3 --out "$RD/e2e_cap.tsv" > "$RD/e2e_cap.log" 2>&1
echo "e2e rc=$?" >> "$S"
grep -E "KV pool|step |policy" "$RD/e2e_cap.log" | head -20 >> "$S"
pack

el "served: 16k (bf16 KV) and 32k (FP8 KV) contexts"
timeout 200 "$R" pkv-make-model --out /tmp/m8awq --shape llama3-8b --quant awq > /dev/null 2>&1
for run in "auto 16384 16000" "fp8_e4m3 32768 32000"; do
  read -r dtype len n <<< "$run"
  start_workers /tmp/m8awq 1 --kv_cache_dtype=$dtype --gpu_memory_limit_gib=11.5 \
    --max_model_len=$len --max_batch_tokens=8192
  start_router
  "$R" pkv info --addr 127.0.0.1:50061 2>&1 | grep -iE "pages|dtype|context" | sed "s/^/$dtype /" >> "$S"
  # One long document (n tokens) and a short question after it, through the router: a command
  # line cannot carry 32k token ids (128 KiB per argument), the serving benchmark's long_doc can.
  timeout 150 "$R" pkv bench serve --router 127.0.0.1:50051 --workload long_doc --num_docs 1 \
    --doc_tokens "$n" --input_len 16 --output_len 16 --len_sigma 0 --concurrency 1 \
    --num_requests 2 --progress=false --json_out "$RD/serve_$dtype.json" > "$RD/serve_$dtype.txt" 2>&1
  echo "$dtype: $n-token document rc=$?" >> "$S"
  grep -iE "requests|ttft|errors|failed" "$RD/serve_$dtype.txt" | head -8 | sed "s/^/$dtype /" >> "$S"
  grep -iE "kv pool|pages|error" /tmp/w0.log | head -5 | sed "s/^/$dtype worker: /" >> "$S"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed "s/^/$dtype /" >> "$S"
  stop_all
  cp /tmp/w0.log "$RD/worker_$dtype.log"; cp /tmp/router.log "$RD/router_$dtype.log"; pack
done
el done
pack; rm -rf "$RD"
cat "$S"
