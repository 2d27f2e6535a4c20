#!/usr/bin/env bash
# GPU-machine call of the `router2` helper (issue 18's open bars), one call:
#   A. pkv-grpc-hop on the 16 cores: what one more gRPC hop costs (an echo straight, and through
#      a proxy) with a new call per request, a message on one long-lived multiplexed stream, calls
#      opened ahead, and the completion-queue API; predicts what a multiplexed router->worker
#      stream would save.
#   B. router cost: TTFT p50 through the router minus straight to the worker (1B, one worker, cache
#      off), with a 100-request warm-up before each timed run, plus the router's stage metrics.
#   C. placement, 4 workers x 1B on the one GPU, the workload of 2026-12-02-h200-router (multi-turn:
#      6 turns, 2048-token shared prompt, 96 conversations, 48 concurrent, no session ids): prefix
#      vs load-only, twice each (alternating), with a 96-request warm-up (the run's first requests,
#      no pause after them) and the per-request dump.
# STAGES (default ABC) picks the stages, e.g. STAGES=C bash .../router2.sh for placement only.
# Bundle: .device/router2.tar.xz (pkv, pkv-router, pkv-worker, pkv-make-model, pkv-grpc-hop + this
# script and common.sh). Device call: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf
#   .device/router2.tar.xz && bash /tmp/pkv/router2/router2.sh
set -u
STAGES=${STAGES:-ABC}
B=/tmp/pkv/router2; R=$B/run
source "$B/common.sh"
{ nvidia-smi --query-gpu=name,memory.total --format=csv; nproc; echo "revision $(cat $B/REVISION)"; } > "$S"
timeout 120 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b > /dev/null 2>&1 &
MK=$!
# Files go to $W; only summary.txt and results.tgz go to $OUT (a call brings back ~8 files), the
# archive rewritten after each stage so that a call cut short still brings back what it made.
W=/tmp/router2-out; mkdir -p "$W"
pack() { tar -C "$W" -czf /tmp/results.tgz . && mv /tmp/results.tgz "$OUT/"; }
if [[ $STAGES == *A* ]]; then
el "A: grpc hop"
H=$W/a_grpc_hop.log
"$R" pkv-grpc-hop server --listen=127.0.0.1:50900 & HS=$!
sleep 0.3
"$R" pkv-grpc-hop proxy --listen=127.0.0.1:50901 --upstream=127.0.0.1:50900 --mux=false & HP1=$!
"$R" pkv-grpc-hop proxy --listen=127.0.0.1:50902 --upstream=127.0.0.1:50900 --mux=true & HP2=$!
"$R" pkv-grpc-hop proxy --listen=127.0.0.1:50903 --upstream=127.0.0.1:50900 --mux=pool & HP3=$!
"$R" pkv-grpc-hop async_proxy --listen=127.0.0.1:50904 --upstream=127.0.0.1:50900 --threads=4 & HP4=$!
sleep 0.5
wait $MK  # the model is written before the timed hops (its CPU would disturb them)
for rep in 1 2; do  # direct call, direct mux, proxy: call, mux, pre-opened, CQ API
  for m in "50900 false" "50900 true" "50901 false" "50902 false" "50903 false" "50904 false"; do
    set -- $m
    timeout 20 "$R" pkv-grpc-hop client --target=127.0.0.1:$1 --mux=$2 --rate=200 --n=400 >> "$H" 2>&1
  done
done
kill $HS $HP1 $HP2 $HP3 $HP4 2>/dev/null; wait $HS $HP1 $HP2 $HP3 $HP4 2>/dev/null
cat "$H" >> "$S"
pack
fi
if [[ $STAGES == *B* ]]; then
wait $MK 2>/dev/null
el "B: router cost"
start_workers /tmp/m1b 1 --prefix_caching=false; start_router
timeout 60 "$R" pkv bench serve --router 127.0.0.1:50051 --worker 127.0.0.1:50061 --target both \
  --workload sharegpt --input_len 32 --output_len 8 --len_sigma 0 --request_rate 100 \
  --num_requests 1000 --warmup_requests 100 --metrics_url 127.0.0.1:9100 --progress=false \
  --json_out "$W/b_router_cost.json" > "$W/b_router_cost.log" 2>&1
{ curl -s 127.0.0.1:9100/metrics | grep -E "^pkv_router_(first_token_stage|time_to_first_token)_seconds_(sum|count)"
  curl -s 127.0.0.1:9101/metrics | grep -E "^pkv_time_to_first_token_seconds_(sum|count)"
} >> "$W/b_router_cost.log"
stop_all
grep -E "^==|TTFT|overhead|counter|warm-up" "$W/b_router_cost.log" >> "$S"
pack
fi
MB=(--workload multi_turn --turns 6 --conversations 96 --system_prompt_tokens 2048
    --input_len 128 --output_len 32 --num_requests 576 --session_ids=false --concurrency 48
    --warmup_requests 96 --metrics_url 127.0.0.1:9100 --progress=false)
L=$W/placement.log
run_mode() {  # NAME ROUTING(prefix|load)
  local name=$1 routing=$2
  start_workers /tmp/m1b 4 --kv_memory_fraction=0.12
  start_router --prefix_routing=$([ "$routing" = prefix ] && echo true || echo false)
  el "$name"
  echo "=== $name" >> "$L"
  timeout 60 "$R" pkv bench serve --router 127.0.0.1:50051 "${MB[@]}" \
    --json_out "$W/$name.json" --dump_requests "$W/$name.jsonl" >> "$L" 2>&1
  curl -s 127.0.0.1:9100/metrics | grep -E "^pkv_router_(placements_total|prefix_)" >> "$L"
  stop_all
  pack
}
wait $MK 2>/dev/null
if [[ $STAGES == *C* ]]; then
  run_mode c_prefix_1 prefix
  run_mode c_load_1 load
  run_mode c_prefix_2 prefix
  run_mode c_load_2 load
fi
grep -E "===|TTFT|E2E|cache hit|worker w|throughput|counter|warm-up|with the" "$L" >> "$S"
el done
cat "$S"
