#!/usr/bin/env bash
# GPU-machine call 2 of the 2026-12-02 session: what the prefix cache and prefix-aware placement
# buy on a served workload, measured from outside with `pkv bench serve` (issue 18), plus the
# Python tokenizers check that call 1 could not start (issue 17).
#   A. 8B shape, one worker: multi-turn chat (8 turns, 1024-token shared system prompt, 64
#      concurrent conversations), prefix caching on vs off (TTFT, ITL, throughput, hit rate).
#   B. 1B shape, 4 workers on the one GPU behind the router, multi-turn + shared prompt:
#      prefix-aware placement vs plain load placement (--prefix_routing=false) vs one worker
#      holding everything (hit rate, TTFT p90, per-worker load).
#   C. router cost: TTFT p50 through the router minus straight to the worker (cache off, so the
#      second run does not hit what the first left behind).
# Bundle as session_checks.sh (.device/s1.tar.xz). Device call: bash bench/device/prefix_cache_serving.sh
set -u
source "$(dirname "$0")/common.sh"
unpack s1
{ nvidia-smi --query-gpu=name,memory.total --format=csv; echo "revision $(cat $B/REVISION)"; } > "$S"
MT=(--workload multi_turn --turns 8 --conversations 64 --concurrency 64 --system_prompt_tokens 1024
    --input_len 128 --output_len 64 --num_requests 512 --metrics_url 127.0.0.1:9100 --progress=false)

el "tokenizers (issue 17)"
printf '#!/bin/sh\nexec %s pkv-tokenize "$@"\n' "$R" > /tmp/pkv-tokenize; chmod +x /tmp/pkv-tokenize
timeout 150 python3 tests/tokenizer/hf_python_agree.py --pkv /tmp/pkv-tokenize \
  --model llama2=$B/tok/llama2 --model gemma3=$B/tok/gemma3 \
  --model llama3=$B/tok/llama3 --model qwen3=$B/tok/qwen3 \
  --corpus tests/tokenizer/corpus.jsonl --corpus tests/tokenizer/corpus_hf_only.jsonl \
  --out "$OUT/hf_python_agree.json" > "$OUT/hf_tokenizers.log" 2>&1
echo "hf_python_agree rc=$?" >> "$S"; tail -n 25 "$OUT/hf_tokenizers.log" >> "$S"

el "A: 8B model"
A=$OUT/a_8b.log
timeout 200 "$R" pkv-make-model --out /tmp/m8b --shape llama3-8b > /dev/null 2>&1
for cache in true false; do
  start_workers /tmp/m8b 1 --prefix_caching=$cache; start_router
  el "A: 8B multi-turn, prefix_caching=$cache"
  echo "=== 8B prefix_caching=$cache" >> "$A"
  timeout 240 "$R" pkv bench serve --router 127.0.0.1:50051 "${MT[@]}" \
    --json_out "$OUT/a_8b_cache_$cache.json" >> "$A" 2>&1
  curl -s 127.0.0.1:9101/metrics | grep -E "^pkv_prefix_cache_(queries|hits)_total" >> "$A"
  stop_all
done
grep -E "===|TTFT|ITL|TPOT|throughput|tok/s|hit" "$A" | head -40 >> "$S"

el "B: 1B, 4 workers on one GPU"
Bl=$OUT/b_4workers.log
timeout 120 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b > /dev/null 2>&1
MB=(--workload multi_turn --turns 6 --conversations 96 --concurrency 48 --system_prompt_tokens 2048
    --input_len 128 --output_len 32 --num_requests 576 --metrics_url 127.0.0.1:9100 --progress=false)
for mode in prefix load single; do
  if [ $mode = single ]; then start_workers /tmp/m1b 1 --kv_memory_fraction=0.5; start_router
  else start_workers /tmp/m1b 4 --kv_memory_fraction=0.12
    start_router --prefix_routing=$([ $mode = prefix ] && echo true || echo false); fi
  el "B: $mode"
  echo "=== placement $mode" >> "$Bl"
  timeout 200 "$R" pkv bench serve --router 127.0.0.1:50051 "${MB[@]}" >> "$Bl" 2>&1
  stop_all
done
grep -E "===|TTFT|hit|worker w" "$Bl" | head -40 >> "$S"

el "C: router cost"
start_workers /tmp/m1b 1 --prefix_caching=false; start_router
timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --worker 127.0.0.1:50061 --target both \
  --workload sharegpt --input_len 32 --output_len 8 --request_rate 100 --num_requests 1000 \
  --metrics_url 127.0.0.1:9100 --progress=false > "$OUT/c_router_cost.log" 2>&1
stop_all
grep -E "TTFT|overhead" "$OUT/c_router_cost.log" >> "$S"
el done
cat "$S"
