#!/usr/bin/env bash
# Issue 18, the router's cost with the router in the worker's process (helper `inproc`), one call:
#   A. pkv-grpc-hop: an echo straight, through a TCP proxy (a new upstream call per request, the
#      router's way) and through a proxy that reaches the echo over gRPC's in-process transport
#      (inproc_proxy), HOP_REPS times, alternating.
#   B. router cost, one worker, two front doors on it in the same run: pkv-colocated (the worker
#      on 50061 with its in-process router on 50052, metrics of both on 9101) and a TCP pkv-router
#      on 50051 (metrics 9100) over that same worker's port. For each front door `pkv bench serve
#      --target both` (router, then straight to the worker; the flags of 2026-12-02-h200-router2:
#      sharegpt 32 in / 8 out, Poisson 100/s, 1000 timed after 100 warm-up, cache off), REPS times
#      (the order flips on every repetition), plus the routers' stage metrics after each run.
# Device: bundle .device/inproc.tar.xz (pkv, pkv-router, pkv-colocated, pkv-make-model,
#   pkv-grpc-hop, this script, common.sh); mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf
#   .device/inproc.tar.xz && bash /tmp/pkv/inproc/inproc.sh
# Build box: LOCAL=1 BIN=build-sm90/bin bash bench/device/inproc.sh (CPU backend, tiny model).
set -u
HOP_REPS=${HOP_REPS:-2}; REPS=${REPS:-1}
N=${N:-1000}; WARM=${WARM:-100}  # timed and warm-up requests per target (router2: 1000, 100)
if [ -n "${LOCAL:-}" ]; then
  OUT=${OUT:-/tmp/inproc-local}; rm -rf "$OUT"; mkdir -p "$OUT"; S=$OUT/summary.txt; T0=$(date +%s)
  el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
  R=env; PATH=$(cd "${BIN:-build-sm90/bin}" && pwd):$PATH
  MODEL=${MODEL:-/tmp/inproc-tiny}; BACKEND=cpu; WFLAGS=()
  [ -d "$MODEL" ] || pkv-make-model --out "$MODEL" --shape tiny > /dev/null
  W=$OUT
else
  B=/tmp/pkv/inproc; R=$B/run
  source "$B/common.sh"
  MODEL=/tmp/m1b; BACKEND=cuda; WFLAGS=(--max_model_len=16384)
  W=/tmp/inproc-out; mkdir -p "$W"
fi
{ nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null; echo "cores $(nproc)"
  echo "revision $(cat "${B:-.}/REVISION" 2>/dev/null || git rev-parse --short HEAD)"; } >> "$S"
pack() { [ -n "${LOCAL:-}" ] || { tar -C "$W" -czf /tmp/results.tgz . && mv /tmp/results.tgz "$OUT/"; }; }
health() {  # ADDR SERVICE: wait until SERVING (up to 200 s)
  for _ in $(seq 1 400); do "$R" pkv health --addr "$1" --service "$2" >/dev/null 2>&1 && return 0
    sleep 0.5; done; echo "not healthy: $1 $2" >> "$S"; }
MK=
if [ -z "${LOCAL:-}" ]; then
  timeout 120 "$R" pkv-make-model --out "$MODEL" --shape llama3-1b > /dev/null 2>&1 & MK=$!
fi

el "A: grpc hop"
H=$W/a_grpc_hop.log
"$R" pkv-grpc-hop server --listen=127.0.0.1:50900 & HS=$!
sleep 0.3
"$R" pkv-grpc-hop proxy --listen=127.0.0.1:50901 --upstream=127.0.0.1:50900 --mux=false & HP=$!
"$R" pkv-grpc-hop inproc_proxy --listen=127.0.0.1:50905 & HI=$!
sleep 0.5
[ -n "$MK" ] && wait $MK  # the model is written before the timed hops (its CPU would disturb them)
for rep in $(seq 1 "$HOP_REPS"); do
  for port in 50900 50901 50905; do
    timeout 20 "$R" pkv-grpc-hop client --target=127.0.0.1:$port --mux=false --rate=200 --n=400 >> "$H" 2>&1
  done
done
kill $HS $HP $HI 2>/dev/null; wait $HS $HP $HI 2>/dev/null
cat "$H" >> "$S"; pack

el "B: router cost"
"$R" pkv-colocated --listen=127.0.0.1:50061 --metrics_listen=127.0.0.1:9101 --worker_id=w0 \
  --model="$MODEL" --backend=$BACKEND --insecure --prefix_caching=false ${WFLAGS[@]+"${WFLAGS[@]}"} \
  --router_listen=127.0.0.1:50052 --router_max_inflight=256 --router_max_queue=256 \
  > "$W/colocated.log" 2>&1 & CP=$!
health 127.0.0.1:50061 pkv.v1.Worker
"$R" pkv-router --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:9100 --insecure \
  --max_inflight=256 --max_queue=256 --workers=127.0.0.1:50061 > "$W/router.log" 2>&1 & RP=$!
health 127.0.0.1:50051 pkv.v1.Generation; health 127.0.0.1:50052 pkv.v1.Generation
stages() {  # METRICS_ADDR
  curl -s "$1/metrics" | grep -E "^pkv_router_(first_token_stage|time_to_first_token)_seconds_(sum|count)"
}
bench() {  # NAME ROUTER METRICS
  echo "=== $1 (router $2)" >> "$W/b_router_cost.log"
  timeout 60 "$R" pkv bench serve --router "$2" --worker 127.0.0.1:50061 --target both \
    --workload sharegpt --input_len 32 --output_len 8 --len_sigma 0 --request_rate 100 \
    --num_requests "$N" --warmup_requests "$WARM" --metrics_url "$3" --progress=false \
    --json_out "$W/b_$1.json" >> "$W/b_router_cost.log" 2>&1
  stages "$3" >> "$W/b_router_cost.log"
}
for rep in $(seq 1 "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="tcp inproc"; else order="inproc tcp"; fi
  for m in $order; do
    if [ $m = tcp ]; then bench tcp_$rep 127.0.0.1:50051 127.0.0.1:9100
    else bench inproc_$rep 127.0.0.1:50052 127.0.0.1:9101; fi
    el "$m $rep"
  done
done
kill -TERM $RP $CP 2>/dev/null; wait $RP $CP 2>/dev/null
grep -E "^===|TTFT   ms|overhead|counter|^pkv_router" "$W/b_router_cost.log" >> "$S"
pack
el done
cat "$S"
