#!/usr/bin/env bash
# GPU-machine call of the `place` helper (issue 18's placement bar on its own model, the 8B shape):
# 4 workers x llama3-8b on the one H200 behind the router, the multi-turn + shared-prompt workload
# of router2's stage C (6 turns, 2048-token shared prompt, 128 new tokens a turn, 32 out, 96 live
# conversations, 48 concurrent, no session ids, 576 timed requests after 96 warm-up ones with no
# pause): prefix-aware vs load-only placement, twice each, and one worker holding everything.
#   KV: --kv_pages (not --kv_memory_fraction, a share of the memory free when the pool is made,
#   which races between four workers loading together): 6144 pages of 16 tokens (12 GiB of 8B
#   KV, 98k tokens) a worker, 4 x (15 GiB weights + 12 GiB KV + buffers) < 139 GiB; the one
#   worker gets the four's total, 24576 pages. Either way no pool evicts: the run's distinct
#   tokens are ~94k.
#   One checkpoint (random weights, pkv-make-model) shared by every worker.
# Per run: the benchmark's table and JSON, its per-request dump, the router's placement counters
# and each worker's TTFT / decode-step / prefill / prefix-cache metrics (where TTFT goes).
# Bundle: .device/place.tar.xz (pkv, pkv-router, pkv-worker, pkv-make-model + this script and
# common.sh). Device call: mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/place.tar.xz &&
#   bash /tmp/pkv/place/place.sh       (RUNS picks runs, default "p1 l1 s l2 p2"; SHAPE=llama3-1b
#   runs the same on the 1B shape, with the same pages a worker: 3 GiB of 1B KV)
# LOCAL=1 (a dry run on the build box): CPU workers, the tiny model, a short workload.
set -u
RUNS=${RUNS:-p1 l1 s l2 p2}
SHAPE=${SHAPE:-llama3-8b}; WFLAGS=(); NREQ=576; NWARM=96; SYS=2048
[ -n "${LOCAL:-}" ] && { SHAPE=tiny; WFLAGS=(--backend=cpu --max_model_len=1024); NREQ=48; NWARM=12; SYS=256; }
B=/tmp/pkv/place; R=$B/run
source "$B/common.sh"
{ nvidia-smi --query-gpu=name,memory.total --format=csv; nproc; echo "revision $(cat $B/REVISION)"; } > "$S"
# Files go to $W; $OUT gets summary.txt and results.tgz (rewritten after each run).
W=/tmp/place-out; mkdir -p "$W"
pack() { tar -C "$W" -czf /tmp/results.tgz . && mv /tmp/results.tgz "$OUT/"; }
M=/tmp/m-$SHAPE
el "make $SHAPE"
if [ ! -f $M/config.json ]; then
  timeout 150 "$R" pkv-make-model --out $M --shape $SHAPE > "$W/make_model.log" 2>&1
  echo "make-model rc=$?" >> "$S"
fi
el "checkpoint: $(du -sh $M | cut -f1)"
MB=(--workload multi_turn --turns 6 --conversations 96 --system_prompt_tokens $SYS
    --input_len 128 --output_len 32 --num_requests $NREQ --session_ids=false --concurrency 48
    --warmup_requests $NWARM --metrics_url 127.0.0.1:9100 --progress=false)
L=$W/placement.log
run_mode() {  # NAME ROUTING(prefix|load|single)
  local name=$1 routing=$2 n=4 pages=6144
  [ "$routing" = single ] && { n=1; pages=24576; }
  start_workers $M $n --kv_pages=$pages "${WFLAGS[@]}"
  start_router --prefix_routing=$([ "$routing" = load ] && echo false || echo true)
  el "$name: $n worker(s) up, GPU memory used $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"
  echo "=== $name" >> "$L"
  timeout 100 "$R" pkv bench serve --router 127.0.0.1:50051 "${MB[@]}" \
    --json_out "$W/$name.json" --dump_requests "$W/$name.jsonl" >> "$L" 2>&1
  echo "bench rc=$?" >> "$L"
  curl -s 127.0.0.1:9100/metrics | grep -E "^pkv_router_(placements_total|prefix_)" >> "$L"
  for i in $(seq 0 $((n - 1))); do
    curl -s 127.0.0.1:$((9101 + i))/metrics |
      grep -E "^pkv_(time_to_first_token_seconds|inter_token_latency_seconds|decode_step_seconds)_(sum|count)|^pkv_(prefill_tokens|prefix_cache_(queries|hits)|preemptions|prefix_cache_evictions)_total" |
      sed "s/^/w$i /" >> "$W/$name.worker_metrics"
  done
  stop_all
  cp /tmp/w0.log "$W/$name.w0.log" 2>/dev/null
  gzip -f "$W/$name.jsonl"
  el "$name done"
  pack
}
for r in $RUNS; do
  case $r in
    p*) run_mode "prefix_${r#p}" prefix ;;
    l*) run_mode "load_${r#l}" load ;;
    s) run_mode single single ;;
  esac
done
grep -E "===|TTFT|ITL|E2E|cache hit|worker w|throughput|counter|warm-up|rc=" "$L" >> "$S"
el done
pack
cat "$S"
