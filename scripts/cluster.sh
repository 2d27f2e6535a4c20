#!/usr/bin/env bash
# Starts a local cluster (pkv-router + 2 pkv-workers on loopback) and either streams one
# generation and stops (`demo`) or keeps serving until Ctrl-C (`serve`).
#   scripts/cluster.sh demo|serve
# Ports: PKV_ROUTER_PORT (50051), PKV_WORKER_PORTS ("50061 50062"), metrics on 9100, 9101, ...,
# the OpenAI-compatible HTTP API on PKV_HTTP_PORT (8000).
# Backend: PKV_BACKEND (auto: the GPU when one is usable, else the CPU).
# One worker per GPU on a multi-GPU host: PKV_GPUS="0 1 2 3" (or "0,1,2,3") starts one worker per
# listed GPU (worker i gets --gpu=<i-th id>; ports 50061, 50062, ... unless PKV_WORKER_PORTS is
# set) and the router spreads sessions across them. PKV_TP=N passes --tp=N to every worker
# (tensor parallelism: CPU rank threads, or with the CUDA backend GPUs --gpu .. --gpu + N - 1, so
# do not combine it with PKV_GPUS).
# PKV_COLOCATED=1 runs the router inside worker 0's process (pkv-colocated: the router reaches it
# over gRPC's in-process transport, no second TCP hop; the other workers stay remote); the
# default is 1 with a single worker, 0 with several. Its /metrics (router and worker-0) is on 9100.
set -euo pipefail
mode=${1:-demo}
BIN=${BUILD:-build}/bin
MODEL=${PKV_MODEL:-models/tiny}
ROUTER_PORT=${PKV_ROUTER_PORT:-50051}
HTTP_PORT=${PKV_HTTP_PORT:-8000}
gpu_list=${PKV_GPUS:-}
read -r -a GPUS <<< "${gpu_list//,/ }"
default_ports="50061 50062"
if [ ${#GPUS[@]} -gt 0 ]; then
  default_ports=""
  for i in "${!GPUS[@]}"; do default_ports+="$((50061 + i)) "; done
fi
read -r -a WORKER_PORTS <<< "${PKV_WORKER_PORTS:-$default_ports}"
if [ ${#GPUS[@]} -gt 0 ] && [ ${#GPUS[@]} -ne ${#WORKER_PORTS[@]} ]; then
  echo "PKV_GPUS lists ${#GPUS[@]} GPUs but PKV_WORKER_PORTS ${#WORKER_PORTS[@]} ports" >&2
  exit 1
fi
METRICS_BASE=${PKV_METRICS_BASE:-9100}
colocated=${PKV_COLOCATED:-$([ ${#WORKER_PORTS[@]} -eq 1 ] && echo 1 || echo 0)}
LOGS=${BUILD:-build}/cluster-logs
mkdir -p "$LOGS"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$ROUTER_PORT" "$HTTP_PORT" "${WORKER_PORTS[@]}"; do
  if port_busy "$p"; then
    echo "port $p is in use (another cluster running? stop it, or set PKV_ROUTER_PORT/PKV_HTTP_PORT/PKV_WORKER_PORTS)" >&2
    exit 1
  fi
done

pids=()
cleanup() {
  trap - EXIT INT TERM
  if [ ${#pids[@]} -gt 0 ]; then
    echo "stopping cluster (SIGTERM: drain and exit)"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  fi
}
trap cleanup EXIT INT TERM

worker_metrics_port() {  # worker i's /metrics (worker 0 shares the router's when colocated)
  if [ "$colocated" = 1 ] && [ "$1" = 0 ]; then echo "$METRICS_BASE"; else echo $((METRICS_BASE + 1 + $1)); fi
}
workers=()
remote=()  # the router's TCP workers
for i in "${!WORKER_PORTS[@]}"; do
  port=${WORKER_PORTS[$i]}
  extra=()
  if [ ${#GPUS[@]} -gt 0 ]; then extra+=(--gpu="${GPUS[$i]}"); fi
  if [ -n "${PKV_TP:-}" ]; then extra+=(--tp="$PKV_TP"); fi
  workers+=("127.0.0.1:$port")
  [ "$colocated" = 1 ] && [ "$i" = 0 ] && continue  # started below, with the router
  "$BIN/pkv-worker" --listen="127.0.0.1:$port" --metrics_listen="127.0.0.1:$(worker_metrics_port "$i")" \
    --worker_id="worker-$i" --model="$MODEL" --backend="${PKV_BACKEND:-auto}" --insecure \
    ${extra[@]+"${extra[@]}"} >"$LOGS/worker-$i.log" 2>&1 &
  pids+=($!)
  remote+=("127.0.0.1:$port")
done
if [ "$colocated" = 1 ]; then
  extra=()
  if [ ${#GPUS[@]} -gt 0 ]; then extra+=(--gpu="${GPUS[0]}"); fi
  if [ -n "${PKV_TP:-}" ]; then extra+=(--tp="$PKV_TP"); fi
  "$BIN/pkv-colocated" --listen="${workers[0]}" --metrics_listen="127.0.0.1:$METRICS_BASE" \
    --worker_id=worker-0 --model="$MODEL" --backend="${PKV_BACKEND:-auto}" --insecure \
    ${extra[@]+"${extra[@]}"} --router_listen="127.0.0.1:$ROUTER_PORT" \
    --router_http_listen="127.0.0.1:$HTTP_PORT" --router_workers="$(IFS=,; echo "${remote[*]}")" \
    >"$LOGS/router.log" 2>&1 &
else
  "$BIN/pkv-router" --listen="127.0.0.1:$ROUTER_PORT" --metrics_listen="127.0.0.1:$METRICS_BASE" \
    --http_listen="127.0.0.1:$HTTP_PORT" \
    --workers="$(IFS=,; echo "${workers[*]}")" --insecure >"$LOGS/router.log" 2>&1 &
fi
pids+=($!)

echo "waiting for router and ${#workers[@]} workers to become healthy (logs in $LOGS/)"
# Readiness service names (README "Reliability"): "" is only liveness.
for target in "${workers[@]/%/|pkv.v1.Worker}" "127.0.0.1:$ROUTER_PORT|pkv.v1.Generation"; do
  addr=${target%|*}
  service=${target#*|}
  ok=0
  for _ in $(seq 1 300); do
    if "$BIN/pkv" health --addr "$addr" --service "$service" >/dev/null 2>&1; then ok=1; break; fi
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "a process exited early; see $LOGS/" >&2; tail -n 5 "$LOGS"/*.log >&2; exit 1; }
    done
    sleep 0.2
  done
  [ $ok = 1 ] || { echo "$addr did not become healthy; see $LOGS/" >&2; exit 1; }
done
echo "cluster healthy: router 127.0.0.1:$ROUTER_PORT -> ${workers[*]}$([ "$colocated" = 1 ] && echo " (worker-0 in the router's process)")"

if [ "$mode" = serve ]; then
  echo "serving; try:  $BIN/pkv generate --router 127.0.0.1:$ROUTER_PORT --prompt \"Once upon a time\""
  echo "   or (OpenAI API): curl http://127.0.0.1:$HTTP_PORT/v1/chat/completions -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 16}'"
  echo "metrics: http://127.0.0.1:$METRICS_BASE/metrics (router), :$(worker_metrics_port 0)/metrics (worker-0)"
  echo "Ctrl-C to stop"
  wait "${pids[@]}"
  exit 0
fi

echo
echo "=== streaming a generation through the router (tokens appear as they are made) ==="
"$BIN/pkv" generate --router "127.0.0.1:$ROUTER_PORT" --prompt "Once upon a time, in a land of GPUs," \
  --max_tokens 64 --temperature 0.8 --seed 7
echo
echo "=== a chat completion through the OpenAI-compatible API (curl, streamed as Server-Sent Events) ==="
# The whole (short) stream first, then its first events: cutting curl off with `head` made it
# print "Failure writing output" at the newcomer.
sse=$(curl -sS -N "http://127.0.0.1:$HTTP_PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Hello!"}],
       "max_tokens": 8, "temperature": 0, "stream": true}' || true)
printf '%s\n' "$sse" | grep '^data:' | head -n 3
echo "... ($(printf '%s\n' "$sse" | grep -c '^data:') events in all, the last: $(printf '%s\n' "$sse" | grep '^data:' | tail -n 1))"
echo
echo "=== a few lines of /metrics ==="
curl -s "127.0.0.1:$METRICS_BASE/metrics" \
  | grep -E '^pkv_router_(requests_total\{code="OK"\}|placements_total|time_to_first_token_seconds_count)' \
  | grep -v ' 0$' | sed 's/^/router    /' | head -n 4 || true
for i in "${!WORKER_PORTS[@]}"; do
  curl -s "127.0.0.1:$(worker_metrics_port "$i")/metrics" \
    | grep -E '^pkv_(generated_tokens_total|decode_steps_total\{route="cpu-reference"\}|kv_cache_pages)' \
    | sed "s/^/worker-$i  /" | head -n 4 || true
done
