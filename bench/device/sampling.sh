#!/usr/bin/env bash
# GPU-machine call for the multi-CTA sampler and the 8B fused-at-B=1 default (2026-12-03, eighth
# session), base (the previous main, *-base binaries) beside new in one call:
#   1. device tests of the new build: sampling_kernel_device_test (the CPU sampler as oracle);
#   2. pkv-bench e2e, 8B and 1B, B=1 at 4k and bimodal B=64, fused+pdl and cublas: base greedy,
#      new greedy, new at temperature 1 (base has no --temperature);
#   3. served, router + one CUDA worker (defaults), 4096-token prompts, 256 tokens, concurrency 1,
#      temperature 1 (pkv bench serve's default): 1B and 8B, base worker then new worker.
# Bundle: device-bundle .device/sampling pkv-bench pkv-worker pkv-router pkv pkv-make-model
#   sampling_kernel_device_test; strip; base binaries copied in as pkv-bench-base and
#   pkv-worker-base (from .device/served, 0569999); git rev-parse HEAD > REVISION; tar -cJf.
# Call: carry [".device/sampling.tar.xz"], command `bash bench/device/sampling.sh`
set -u
source "$(dirname "$0")/common.sh"
unpack sampling
RD=$OUT/r; mkdir -p "$RD"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "revision $(cat $B/REVISION)"; } > "$S"

el "1. device tests"
timeout 120 "$R" sampling_kernel_device_test > "$RD/sampling_test.log" 2>&1
echo "rc=$? sampling_kernel_device_test" >> "$S"
grep -E "PASSED|FAILED|tests ran" "$RD/sampling_test.log" >> "$S"
pack

el "2. e2e"
e2e() {  # TAG BIN ARGS...
  local tag=$1 bin=$2; shift 2
  timeout 150 "$R" $bin e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b,llama3-1b \
    --decode_lines bucketed-B1-N4096,bimodal-B64 --variants cublas,fused+pdl --prompts "" \
    --drift_prompts 0 --out "$RD/e2e_$tag.tsv" "$@" > "$RD/e2e_$tag.log" 2>&1
  echo "rc=$? e2e $tag" >> "$S"
  grep -E " step " "$RD/e2e_$tag.log" | sed "s/^/$tag /" >> "$S"
}
e2e base_t0 pkv-bench-base
e2e new_t0 pkv-bench
e2e new_t1 pkv-bench --temperature 1
pack

el "3. served"
for m in "1b llama3-1b" "8b llama3-8b"; do
  read -r tag shape <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$RD/make_$tag.log" 2>&1
  for w in pkv-worker-base pkv-worker; do
    "$R" $w --listen=127.0.0.1:50061 --metrics_listen=127.0.0.1:9101 --worker_id=w0 \
      --model=/tmp/m-$tag --backend=cuda --insecure --max_model_len=8192 > /tmp/w0.log 2>&1 &
    WPIDS=($!); WADDRS=(127.0.0.1:50061); wait_healthy 127.0.0.1:50061 pkv.v1.Worker
    start_router
    timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
      --input_len 4096 --output_len 256 --len_sigma 0 --concurrency 1 --num_requests 5 \
      --progress=false --json_out "$RD/serve_${tag}_$w.json" > "$RD/serve_${tag}_$w.txt" 2>&1
    echo "rc=$? served $tag $w" >> "$S"
    grep -E "TPOT|ITL" "$RD/serve_${tag}_$w.txt" | sed "s/^/$tag $w /" >> "$S"
    stop_all
    cp /tmp/w0.log "$RD/worker_${tag}_$w.log"
  done
  rm -rf /tmp/m-$tag; pack
done
el done
pack; rm -rf "$RD"
cat "$S"
