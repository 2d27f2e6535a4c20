#!/usr/bin/env bash
# 2026-12-03 eleventh session: where the served step's extra ~60-80 us goes (8B served ITL p50
# 4.53-4.57 ms vs e2e 4.46-4.48 at the same 4224-token rows, l2kv). One served 8B and 1B run with
# main's worker (.device/l2kv's pkv-worker-base), the worker's own metrics scraped after it:
# pkv_decode_step_seconds (Schedule + Prepare + backend Step, engine_step.cc) and
# pkv_inter_token_latency_seconds (the worker's token-to-token time). Step mean ~ ITL: the gap is
# inside the step (plan, backend host, GPU); step mean ~ e2e: it is the loop around it
# (Postprocess, streaming, inbox, PublishLoad). Also e2e of 256 steps (mean vs median).
# Call: carry [".device/l2kv.tar.xz"], `bash bench/device/gap.sh` (~2 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack l2kv
RD=$OUT/r; mkdir -p "$RD"
for m in "8b llama3-8b" "1b llama3-1b"; do
  read -r tag shape <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$RD/make_$tag.log" 2>&1
  WORKER_BIN=pkv-worker-base start_workers /tmp/m-$tag 1 --max_model_len=8192
  start_router
  timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
    --input_len 4096 --output_len 256 --len_sigma 0 --concurrency 1 --num_requests 5 \
    --progress=false > "$RD/serve_$tag.txt" 2>&1
  echo "rc=$? served $tag" >> "$S"
  grep -E "TPOT|ITL" "$RD/serve_$tag.txt" | sed "s/^/$tag /" >> "$S"
  scrape_worker "$tag"
  curl -s 127.0.0.1:9101/metrics > "$RD/metrics_$tag.txt" 2>/dev/null || true
  stop_all; cp /tmp/w0.log "$RD/worker_$tag.log"; rm -rf /tmp/m-$tag
done
TR=/tmp/trace.tsv; cp bench/traces/heldout-20260623.tsv $TR
printf 'served-B1-N4224\tbucketed\t1\t4224\n' >> $TR
e2e_line "$R" pkv-bench-base long "$RD" --trace $TR --shapes llama3-8b,llama3-1b \
  --variants fused+pdl --temperature 1 --decode_lines served-B1-N4224 --steps 256
pack
el done
cat "$S"
