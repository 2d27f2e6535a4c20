#!/usr/bin/env bash
# Served 8B at 8 concurrent streams, the sixteenth session's fused defaults against the old ones
# (issue 14's served side of the B=8 line): one worker + router, `pkv bench serve` with 16
# requests of 2048 prompt tokens x 128 output tokens at concurrency 8, client-side TPOT / ITL.
#   new: the worker's defaults (fused up to 8 tokens, inputs normalized once from 4 tokens)
#   old: --fused_wide_max_tokens=1 --fused_prenorm_min_tokens=0 (cuBLAS above one token)
# Prediction (e2e confirm16: B=8 5.49 vs 5.84 ms, B=4 5.00 vs 5.29): TPOT -5..-7% at
# concurrency 8 (steps mix 8 decode rows with prefill chunks, which run eagerly either way).
# Bundle: bash bench/device/bundle.sh served16 pkv-worker pkv-router pkv pkv-make-model
# Call: carry [".device/served16.tar.xz"], `bash bench/device/served16.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
start_call served16
timeout 200 "$R" pkv-make-model --out /tmp/m8b --shape llama3-8b > "$RD/make.log" 2>&1
el "make rc=$?"
serve8() {  # serve8 TAG FLAG...
  local tag=$1; shift
  start_workers /tmp/m8b 1 --max_model_len=8192 "$@"
  start_router
  timeout 150 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
    --input_len 2048 --output_len 128 --len_sigma 0 --concurrency 8 --num_requests 16 \
    --progress=false --json_out "$RD/serve_$tag.json" > "$RD/serve_$tag.txt" 2>&1
  echo "rc=$? served $tag" >> "$S"
  grep -E "TPOT|ITL|TTFT|errors|tok/s" "$RD/serve_$tag.txt" | sed "s/^/$tag /" >> "$S"
  scrape_worker "$tag"
  stop_all
  cp /tmp/w0.log "$RD/worker_$tag.log"
  pack
}
serve8 new
serve8 old --fused_wide_max_tokens=1 --fused_prenorm_min_tokens=0

el done
cat "$S"
