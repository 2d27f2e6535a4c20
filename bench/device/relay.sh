#!/usr/bin/env bash
# 2026-12-03 eleventh session. Branch `relay`: the engine's sink calls (a token's OnChunk, which
# starts the gRPC write inline) run on a relay thread instead of the scheduler thread between two
# steps (worker/engine/sink_relay.h). gap.sh measured the scheduler loop's time outside the step
# at ~46 us (8B) / ~41 us (1B) a token. Prediction: served TPOT at B=1 -40..-45 us on both (8B
# 4.64 -> ~4.60 ms, 1B 1.15 -> ~1.11), the worker's own ITL within ~5 us of its step time; at
# concurrency 32 (32 streams a step, ~32 inline writes a step today) tokens/s +3..+10%.
# Bundle .device/relay: the branch's pkv-worker, main's as pkv-worker-base, pkv-router, pkv,
# pkv-make-model. Call: carry [".device/relay.tar.xz"], `bash bench/device/relay.sh` (~4 min).
set -u
source "$(dirname "$0")/common.sh"
unpack relay
RD=$OUT/r; mkdir -p "$RD"
el "relay $(cat $B/REVISION)"
serve() {  # serve TAG MODEL CONCURRENCY REQUESTS INPUT OUTPUT
  local tag=$1 model=$2 c=$3 n=$4 in=$5 out=$6
  start_workers "$model" 1 --max_model_len=8192
  start_router
  timeout 150 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
    --input_len $in --output_len $out --len_sigma 0 --concurrency $c --num_requests $n \
    --progress=false > "$RD/serve_$tag.txt" 2>&1
  echo "rc=$? served $tag" >> "$S"
  grep -E "TPOT|ITL|tok/s|throughput|errors" "$RD/serve_$tag.txt" | sed "s/^/$tag /" >> "$S"
  scrape_worker "$tag"
  stop_all; cp /tmp/w0.log "$RD/worker_$tag.log"
}
for m in "1b llama3-1b" "8b llama3-8b"; do
  read -r tag shape <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$RD/make_$tag.log" 2>&1
  for r in 1 2; do
    for w in pkv-worker-base pkv-worker; do
      WORKER_BIN=$w serve "${tag}_${w}_b1_$r" /tmp/m-$tag 1 5 4096 256
    done
  done
  for w in pkv-worker-base pkv-worker; do
    WORKER_BIN=$w serve "${tag}_${w}_c32" /tmp/m-$tag 32 64 1024 128
  done
  rm -rf /tmp/m-$tag; pack
done
el done
cat "$S"
