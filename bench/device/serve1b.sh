#!/usr/bin/env bash
# Is the served 1B B=1 step host-bound? (2026-12-03 tenth session: final10 measured e2e 1.130 ->
# 1.085 ms but served TPOT 1.14 both before and after.) One 1B worker served twice: the learned
# policy (256-token splits at 4k since 65a5e16) and fixed:split:128 (the former 128-token floor).
# Bundle .device/final10. Call: carry [".device/final10.tar.xz"], `bash bench/device/serve1b.sh`.
set -u
source "$(dirname "$0")/common.sh"
unpack final10
RD=$OUT/r; mkdir -p "$RD"
timeout 100 "$R" pkv-make-model --out /tmp/m-1b --shape llama3-1b > "$RD/make.log" 2>&1
for pol in learned fixed:split:128 learned; do
  tag=${pol//:/_}
  start_workers /tmp/m-1b 1 --max_model_len=8192 --decode_policy=$pol
  start_router
  timeout 60 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
    --input_len 4096 --output_len 256 --len_sigma 0 --concurrency 1 --num_requests 4 \
    --progress=false > "$RD/serve_$tag.txt" 2>&1
  echo "rc=$? served 1b $pol" >> "$S"
  grep -E "TPOT|ITL" "$RD/serve_$tag.txt" | sed "s/^/$tag /" >> "$S"
  stop_all
done
tar -C "$OUT" -czf "$OUT/results.tgz" r
cat "$S"
