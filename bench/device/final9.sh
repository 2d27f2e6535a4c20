#!/usr/bin/env bash
# Closing call of the 2026-12-03 ninth session: main's head (attention in the PDL chain for steps
# of <= 8 tokens, the multi-CTA filtered draw) beside main 9804647, served figures, and a per-kernel
# map of one decode step for the next session.
# Bundles (build box, build-sm90 = sm_90a):
#   .device/next9.tar.xz   base 9804647 (pkv-bench)
#   .device/final9.tar.xz  device-bundle .device/final9 pkv-bench pkv-worker pkv-router pkv
#     pkv-make-model cuda_backend_device_test decode_attention_device_test decode_fp8_device_test
#     fp8_kv_device_test sampling_kernel_device_test quantized_backend_device_test; REVISION;
#     bin/pkv-bench-b4cedef = helper topp's base (main's sampler + e2e --top_k/--min_p)
# Call: carry [".device/next9.tar.xz", ".device/final9.tar.xz"], `bash bench/device/final9.sh`
#   (~7 min warm). Phases re-pack results after each.
set -u
source "$(dirname "$0")/common.sh"
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/next9.tar.xz
BASE=/tmp/pkv/next9/run
unpack final9
RD=$OUT/r; mkdir -p "$RD/tests"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "revision $(cat $B/REVISION) vs base $(cat /tmp/pkv/next9/REVISION)"; } > "$S"

el "1. device tests (parallel)"
parallel_tests "$RD/tests" cuda_backend_device_test:200 decode_attention_device_test:200 \
  decode_fp8_device_test:200 fp8_kv_device_test:200 sampling_kernel_device_test:200 \
  quantized_backend_device_test:200
pack

e2e() { local run=$1 tag=$2; shift 2; e2e_line "$run" pkv-bench "$tag" "$RD" "$@"; }  # RUN TAG ARGS...
el "2. e2e base vs new (temperature 1; then top_p 0.9; then top_k 40 + top_p 0.95 + min_p 0.05)"
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64
   --variants fused+pdl,pdl --temperature 1)
for i in 1 2; do e2e "$BASE" base$i "${L[@]}"; e2e "$R" new$i "${L[@]}"; done
e2e "$BASE" base_p09 "${L[@]}" --top_p 0.9
e2e "$R" new_p09 "${L[@]}" --top_p 0.9
C=(--top_k 40 --top_p 0.95 --min_p 0.05)
# The base binary predates --top_k/--min_p: b4cedef is 9804647's sampler with those flags.
e2e_line "$R" pkv-bench-b4cedef base_combo "$RD" "${L[@]}" "${C[@]}"
e2e "$R" new_combo "${L[@]}" "${C[@]}"
pack

el "3. served (router + one worker, 4096-token prompts, 256 tokens, concurrency 1)"
for m in "1b llama3-1b" "8b llama3-8b"; do
  read -r tag shape <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$RD/make_$tag.log" 2>&1
  echo "rc=$? make $tag" >> "$S"
  start_workers /tmp/m-$tag 1 --max_model_len=8192
  start_router
  for p in 1 0.9; do
    timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
      --input_len 4096 --output_len 256 --len_sigma 0 --concurrency 1 --num_requests 5 --top_p $p \
      --progress=false --json_out "$RD/serve_${tag}_p$p.json" > "$RD/serve_${tag}_p$p.txt" 2>&1
    echo "rc=$? served $tag top_p $p" >> "$S"
    grep -E "TPOT|ITL|TTFT|errors" "$RD/serve_${tag}_p$p.txt" | sed "s/^/$tag p$p /" >> "$S"
  done
  stop_all
  cp /tmp/w0.log "$RD/worker_$tag.log"
  rm -rf /tmp/m-$tag; pack
done

el "4. one decode step per kernel (ncu, clocks and caches left alone; kernels serialised)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  for shape in llama3-8b llama3-1b; do
    timeout 150 "$NCU" --clock-control none --cache-control none --csv --page raw \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
      "$B/bin/pkv-bench" e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
      --drift_prompts 0 --shapes $shape --decode_lines bucketed-B1-N4096 --variants fused+pdl \
      --warmup 1 --steps 1 > "$RD/ncu_$shape.csv" 2> "$RD/ncu_$shape.err"
    echo "rc=$? ncu $shape $(wc -l < "$RD/ncu_$shape.csv") lines" >> "$S"
    pack
  done
fi
el done
pack
cat "$S"
