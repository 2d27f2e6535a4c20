#!/usr/bin/env bash
# GPU-machine call 3 of the 2026-12-02 session (issue 18): prefix-aware placement against plain
# load placement when requests carry NO session id (so affinity cannot stand in for the prefix
# index), 1B shape, 4 workers sharing the one GPU, multi-turn + 2048-token shared prompt; and one
# worker holding everything as the hit-rate reference. Uses call 1's bundle (.device/s1.tar.xz)
# with the newer `pkv` client (.device/extra/pkv.xz: --session_ids).
set -u
source "$(dirname "$0")/common.sh"
unpack s1
xz -dc .device/extra/pkv.xz > $B/bin/pkv; chmod +x $B/bin/pkv
echo "revision $(cat $B/REVISION) + pkv client $(git rev-parse --short HEAD 2>/dev/null)" > "$S"
timeout 120 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b > /dev/null 2>&1
MB=(--workload multi_turn --turns 6 --conversations 96 --concurrency 48 --system_prompt_tokens 2048
    --input_len 128 --output_len 32 --num_requests 576 --session_ids=false
    --metrics_url 127.0.0.1:9100 --progress=false)
L=$OUT/placement.log
for mode in prefix load single; do
  if [ $mode = single ]; then start_workers /tmp/m1b 1 --kv_memory_fraction=0.5; start_router
  else start_workers /tmp/m1b 4 --kv_memory_fraction=0.12
    start_router --prefix_routing=$([ $mode = prefix ] && echo true || echo false); fi
  el "$mode"
  echo "=== placement $mode (no session ids)" >> "$L"
  timeout 200 "$R" pkv bench serve --router 127.0.0.1:50051 "${MB[@]}" >> "$L" 2>&1
  curl -s 127.0.0.1:9100/metrics | grep -E "^pkv_router_(placements_total|prefix_)" >> "$L"
  stop_all
done
grep -E "===|TTFT|hit|worker w|throughput" "$L" >> "$S"
el done
cat "$S"
