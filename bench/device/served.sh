#!/usr/bin/env bash
# Issue 14's "side by side in one run": pkv-bench e2e step times beside client-side step times of
# a served run (router + one CUDA worker, greedy, ignore_eos), plus issue 13's FP8-weight line.
#   1. pkv-bench e2e, 8B and 1B shapes, B=1 at 4k, uniform B=8, bimodal B=64, fused+pdl and
#      cublas, bf16 with its AWQ and FP8-weight twins;
#   2. served: pkv-make-model 1B bf16, 8B bf16, 8B AWQ; per model one worker (defaults) behind a
#      router; pkv bench serve, 4096-token random prompts, 256 output tokens, concurrency 1 (B=1)
#      then 8 (B=8); TPOT and ITL from the client.
# Bundle (build box, sm_90a build dir):
#   /work/shared/tools/device-bundle /work/main/.device/served pkv-bench pkv-worker pkv-router \
#     pkv pkv-make-model; strip .device/served/bin/*; git rev-parse HEAD > .device/served/REVISION
#   cd .device && XZ_OPT="-9 -T2" tar -cJf served.tar.xz served
# Call: carry [".device/served.tar.xz"], command `bash bench/device/served.sh`
set -u
source "$(dirname "$0")/common.sh"
unpack served
RD=$OUT/r; mkdir -p "$RD"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "revision $(cat $B/REVISION)"; } > "$S"

el "1. e2e"
timeout 240 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv \
  --shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,uniform-B8,bimodal-B64 \
  --variants cublas,fused+pdl --prompts "" --quant awq,fp8 --drift_prompts 0 \
  --out "$RD/e2e.tsv" > "$RD/e2e.log" 2>&1
echo "rc=$? e2e" >> "$S"
grep -E " step " "$RD/e2e.log" >> "$S"
pack

el "2. served"
for m in "1b llama3-1b" "8b llama3-8b" "8b-awq llama3-8b --quant awq"; do
  read -r tag shape rest <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape $rest > "$RD/make_$tag.log" 2>&1
  echo "rc=$? make $tag" >> "$S"
  start_workers /tmp/m-$tag 1 --max_model_len=8192
  start_router
  for c in 1 8; do
    n=$(( c == 1 ? 5 : 16 ))
    timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
      --input_len 4096 --output_len 256 --len_sigma 0 --concurrency $c --num_requests $n \
      --progress=false --json_out "$RD/serve_${tag}_c$c.json" > "$RD/serve_${tag}_c$c.txt" 2>&1
    echo "rc=$? served $tag concurrency $c" >> "$S"
    grep -E "TPOT|ITL|TTFT|errors" "$RD/serve_${tag}_c$c.txt" | sed "s/^/$tag c$c /" >> "$S"
  done
  stop_all
  cp /tmp/w0.log "$RD/worker_$tag.log"; cp /tmp/router.log "$RD/router_$tag.log"
  rm -rf /tmp/m-$tag; pack
done
el done
pack
cat "$S"
