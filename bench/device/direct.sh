#!/usr/bin/env bash
# Issue 18, the router's cost with direct calls into the co-located engine (helper `direct`), one
# call. Three front doors, each measured against its own worker in the same run with `pkv bench
# serve --target both` (router, then straight to the worker; the flags of 2026-12-02-h200-router2
# and 2026-12-03-h200-inproc: sharegpt 32 in / 8 out, Poisson 100/s, 1000 timed after 100
# warm-up, prefix cache off):
#   direct  pkv-colocated (default: the router's streams call the engine directly), worker on
#           50061, router on 50052, metrics 9101
#   inproc  pkv-colocated --router_direct=false (Generate over gRPC's in-process transport, the
#           path of 2026-12-03-h200-inproc), worker on 50062, router on 50053, metrics 9102
#   tcp     pkv-router on 50051 (metrics 9100) over the direct process's worker port (50061)
# ORDERS: one word list per repetition ("direct inproc tcp,tcp inproc direct"); after each run the
# routers' stage metrics. Both colocated processes share the GPU (--gpu_memory_limit_gib each).
# Device: bundle .device/direct.tar.xz (pkv, pkv-router, pkv-colocated, pkv-make-model, this
#   script, common.sh); mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/direct.tar.xz &&
#   bash /tmp/pkv/direct/direct.sh
# Build box: LOCAL=1 BIN=build-sm90/bin bash bench/device/direct.sh (CPU backend, tiny model).
set -u
ORDERS=${ORDERS:-direct inproc tcp,tcp inproc direct}
N=${N:-1000}; WARM=${WARM:-100}  # timed and warm-up requests per target (router2: 1000, 100)
if [ -n "${LOCAL:-}" ]; then
  OUT=${OUT:-/tmp/direct-local}; rm -rf "$OUT"; mkdir -p "$OUT"; S=$OUT/summary.txt; T0=$(date +%s)
  el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
  R=env; PATH=$(cd "${BIN:-build-sm90/bin}" && pwd):$PATH
  MODEL=${MODEL:-/tmp/direct-tiny}; BACKEND=cpu; WFLAGS=()
  [ -d "$MODEL" ] || pkv-make-model --out "$MODEL" --shape tiny > /dev/null
  W=$OUT
else
  B=/tmp/pkv/direct; R=$B/run
  source "$B/common.sh"
  MODEL=/tmp/m1b; BACKEND=cuda; WFLAGS=(--max_model_len=16384 --gpu_memory_limit_gib=40)
  W=/tmp/direct-out; mkdir -p "$W"
  [ -d "$MODEL" ] || timeout 120 "$R" pkv-make-model --out "$MODEL" --shape llama3-1b > /dev/null 2>&1
fi
{ nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null; echo "cores $(nproc)"
  echo "revision $(cat "${B:-.}/REVISION" 2>/dev/null || git rev-parse --short HEAD)"; } >> "$S"
pack() { [ -n "${LOCAL:-}" ] || { tar -C "$W" -czf /tmp/results.tgz . && mv /tmp/results.tgz "$OUT/"
  cp "$W/router_cost.log" "$OUT/" 2>/dev/null; }; }
health() {  # ADDR SERVICE: wait until SERVING (up to 200 s)
  for _ in $(seq 1 400); do "$R" pkv health --addr "$1" --service "$2" >/dev/null 2>&1 && return 0
    sleep 0.5; done; echo "not healthy: $1 $2" >> "$S"; }
colocated() {  # NAME WORKER_PORT ROUTER_PORT METRICS_PORT FLAG...
  local name=$1 wp=$2 rp=$3 mp=$4; shift 4
  "$R" pkv-colocated --listen=127.0.0.1:$wp --metrics_listen=127.0.0.1:$mp --worker_id=$name \
    --model="$MODEL" --backend=$BACKEND --insecure --prefix_caching=false ${WFLAGS[@]+"${WFLAGS[@]}"} \
    --router_listen=127.0.0.1:$rp --router_max_inflight=256 --router_max_queue=256 "$@" \
    > "$W/colocated_$name.log" 2>&1 &
}
el "start"
colocated direct 50061 50052 9101; DP=$!
colocated inproc 50062 50053 9102 --router_direct=false; IP=$!
health 127.0.0.1:50061 pkv.v1.Worker; health 127.0.0.1:50062 pkv.v1.Worker
"$R" pkv-router --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:9100 --insecure \
  --max_inflight=256 --max_queue=256 --workers=127.0.0.1:50061 > "$W/router.log" 2>&1 & RP=$!
for p in 50051 50052 50053; do health 127.0.0.1:$p pkv.v1.Generation; done
el "serving"
stages() {  # METRICS_ADDR
  curl -s "$1/metrics" | grep -E "^pkv_router_(first_token_stage|time_to_first_token)_seconds_(sum|count)"
}
bench() {  # NAME ROUTER WORKER METRICS
  echo "=== $1 (router $2, worker $3)" >> "$W/router_cost.log"
  timeout 60 "$R" pkv bench serve --router "$2" --worker "$3" --target both \
    --workload sharegpt --input_len 32 --output_len 8 --len_sigma 0 --request_rate 100 \
    --num_requests "$N" --warmup_requests "$WARM" --metrics_url "$4" --progress=false \
    --json_out "$W/$1.json" >> "$W/router_cost.log" 2>&1
  stages "$4" >> "$W/router_cost.log"
}
rep=0
IFS=, read -r -a REP_ORDERS <<< "$ORDERS"
for order in "${REP_ORDERS[@]}"; do
  rep=$((rep + 1))
  for m in $order; do
    case $m in
      direct) bench direct_$rep 127.0.0.1:50052 127.0.0.1:50061 127.0.0.1:9101 ;;
      inproc) bench inproc_$rep 127.0.0.1:50053 127.0.0.1:50062 127.0.0.1:9102 ;;
      tcp) bench tcp_$rep 127.0.0.1:50051 127.0.0.1:50061 127.0.0.1:9100 ;;
    esac
    el "$m $rep"; pack
  done
done
kill -TERM $RP $DP $IP 2>/dev/null; wait $RP $DP $IP 2>/dev/null
grep -E "^===|TTFT   ms|overhead|counter|^pkv_router" "$W/router_cost.log" >> "$S"
pack
el done
cat "$S"
