#!/usr/bin/env bash
# GPU-machine call of the `router` helper (issue 18's open bars), one call:
#   A. router cost: TTFT p50 through the router minus straight to the worker (1B, one worker,
#      cache off so the second run cannot hit the first's pages), plus the router's first-token
#      stage metrics and the worker's own TTFT (where the difference goes).
#   B. placement, 4 workers x 1B on the one GPU, the workload of 2026-12-02-h200-placement
#      (multi-turn: 6 turns, 2048-token shared prompt, 96 conversations, 48 concurrent, no session
#      ids): prefix-aware vs load-only vs one worker, with the workers' new in-flight prefix wait
#      (--prefix_wait_in_flight, default on) and, as the control, without it.
#   C. the same conversations open-loop (Poisson 100 requests/s), prefix vs load.
# Bundle: .device/router.tar.xz (pkv, pkv-router, pkv-worker, pkv-make-model + this script and
# common.sh). Device call: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/router.tar.xz &&
#   bash /tmp/pkv/router/router_placement.sh
set -u
B=/tmp/pkv/router; R=$B/run
source "$B/common.sh"
{ nvidia-smi --query-gpu=name,memory.total --format=csv; echo "revision $(cat $B/REVISION)"; } > "$S"
timeout 120 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b > /dev/null 2>&1
el "A: router cost"
start_workers /tmp/m1b 1 --prefix_caching=false; start_router
timeout 60 "$R" pkv bench serve --router 127.0.0.1:50051 --worker 127.0.0.1:50061 --target both \
  --workload sharegpt --input_len 32 --output_len 8 --len_sigma 0 --request_rate 100 \
  --num_requests 1000 --metrics_url 127.0.0.1:9100 --progress=false > "$OUT/a_router_cost.log" 2>&1
{ curl -s 127.0.0.1:9100/metrics | grep -E "^pkv_router_(first_token_stage|time_to_first_token)_seconds_(sum|count)"
  curl -s 127.0.0.1:9101/metrics | grep -E "^pkv_time_to_first_token_seconds_(sum|count)"
} >> "$OUT/a_router_cost.log"
stop_all
grep -E "TTFT|overhead|_sum|_count" "$OUT/a_router_cost.log" >> "$S"
MB=(--workload multi_turn --turns 6 --conversations 96 --system_prompt_tokens 2048
    --input_len 128 --output_len 32 --num_requests 576 --session_ids=false
    --metrics_url 127.0.0.1:9100 --progress=false)
L=$OUT/placement.log
run_mode() {  # NAME WAIT(true|false) ROUTING(prefix|load|single) LOAD-FLAGS...
  local name=$1 wait=$2 routing=$3; shift 3
  if [ "$routing" = single ]; then
    start_workers /tmp/m1b 1 --kv_memory_fraction=0.5 --prefix_wait_in_flight=$wait; start_router
  else
    start_workers /tmp/m1b 4 --kv_memory_fraction=0.12 --prefix_wait_in_flight=$wait
    start_router --prefix_routing=$([ "$routing" = prefix ] && echo true || echo false)
  fi
  el "$name"
  echo "=== $name" >> "$L"
  timeout 60 "$R" pkv bench serve --router 127.0.0.1:50051 "${MB[@]}" "$@" \
    --json_out "$OUT/$name.json" >> "$L" 2>&1
  curl -s 127.0.0.1:9100/metrics | grep -E "^pkv_router_(placements_total|prefix_)" >> "$L"
  stop_all
}
run_mode b_prefix_wait true prefix --concurrency 48
run_mode b_load_wait true load --concurrency 48
run_mode b_single_wait true single --concurrency 48
run_mode b_prefix_nowait false prefix --concurrency 48
run_mode b_load_nowait false load --concurrency 48
run_mode c_prefix_open true prefix --request_rate 100
run_mode c_load_open true load --request_rate 100
grep -E "===|TTFT|cache hit|worker w|throughput" "$L" >> "$S"
el done
cat "$S"
