#!/usr/bin/env bash
# One GPU-machine call that checks and measures everything the CPU machines cannot:
#   1. every device test binary (decode engine, prefill, CUDA model backend incl. the fused
#      small-batch path and PDL, GEMV/GEMM, sampling kernel, NCCL communicator, CUDA TP on one GPU)
#   2. a real cluster on the GPU: pkv-make-model llama3-1b, pkv-worker --backend=cuda with an empty
#      policy directory (so the on-start route calibration runs and caches its file), pkv-router,
#      pkv generate streams (greedy, seeded, 8 concurrent); then the integration suite with its
#      workers on the CUDA backend (PKV_TEST_BACKEND=cuda)
#   3. pkv-bench e2e: the cuBLAS / skinny / fused / PDL / cuBLASLt-tuned variants side by side
#   4. pkv-bench policy --live on the held-out grid (the policies in policies/ against live times)
# Build machine: build/ with CUDA, then device-bundle into .device/final, tar+xz it to
# .device/final.tar.xz (see bench/results/README.md). Device call: carry [".device/final.tar.xz"],
#   bash bench/device/final.sh
# Every phase has a timeout; the whole call stays under ~8 minutes. At most 8 files go to $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
S=$OUT/summary.txt
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/final.tar.xz
R=/tmp/pkv/final/run
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  echo "revision $(cat /tmp/pkv/final/REVISION)"; date -u; } > "$S" 2>&1

# 1. Device tests.
el "device tests"
T=$OUT/device_tests.log
for tl in decode_attention_device_test:150 cuda_backend_device_test:150 \
          prefill_attention_device_test:60 sampling_kernel_device_test:60 gemv_device_test:60 \
          gemm_tune_device_test:60 skinny_gemm_device_test:30 nccl_communicator_test:30 \
          cuda_tp_device_test:60; do
  IFS=: read -r t c <<< "$tl"
  echo "=== $t" >> "$T"
  timeout "$c" "$R" "$t" --gtest_brief=1 >> "$T" 2>&1
  echo "rc=$? $t" | tee -a "$T" >> "$S"
done
grep -E "PASSED|FAILED|tests ran" "$T" >> "$S"

# 2. A cluster on the GPU, then the integration suite on the CUDA backend.
el "cluster on the GPU"
C=$OUT/cluster.log
timeout 120 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b >> "$C" 2>&1
echo "make-model rc=$?" >> "$S"
mkdir -p /tmp/pol
"$R" pkv-worker --listen=127.0.0.1:50061 --metrics_listen=127.0.0.1:9101 --worker_id=gpu0 \
  --model=/tmp/m1b --backend=cuda --insecure --policy_dir=/tmp/pol --max_model_len=8192 \
  > /tmp/worker.log 2>&1 &
WPID=$!
"$R" pkv-router --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:9100 \
  --workers=127.0.0.1:50061 --insecure > /tmp/router.log 2>&1 &
RPID=$!
for _ in $(seq 1 180); do
  "$R" pkv health --addr 127.0.0.1:50051 --service pkv.v1.Generation >/dev/null 2>&1 && break
  sleep 0.5
done
el "cluster healthy (or gave up)"
{
  echo "--- greedy"; timeout 60 "$R" pkv generate --router 127.0.0.1:50051 \
    --prompt "Once upon a time, on a GPU far away," --max_tokens 64 --temperature 0 --ignore_eos
  echo; echo "--- seeded x2 (must be equal)"
  for i in 1 2; do timeout 60 "$R" pkv generate --router 127.0.0.1:50051 \
    --token_ids 1,2,3,4,5,6,7,8 --max_tokens 32 --temperature 0.8 --seed 42 --ignore_eos; echo; done
  echo "--- 8 concurrent"
  for i in $(seq 1 8); do timeout 60 "$R" pkv generate --router 127.0.0.1:50051 \
    --token_ids "$i,20,30,40" --max_tokens 128 --temperature 0 --ignore_eos > /tmp/c$i.txt 2>&1 & done
  wait $(jobs -p | grep -v -e "^$WPID$" -e "^$RPID$") 2>/dev/null
  tail -n 1 /tmp/c*.txt
  echo "--- worker metrics"
  curl -s 127.0.0.1:9101/metrics | grep -E '^pkv_(decode_steps_total|generated_tokens_total|kv_cache_pages)' | grep -v ' 0$'
  echo "--- policy cache"; ls -la /tmp/pol
} >> "$C" 2>&1
kill -TERM "$RPID" "$WPID"; wait "$RPID" "$WPID" 2>/dev/null
{ echo "--- worker log"; cat /tmp/worker.log; echo "--- router log"; tail -n 20 /tmp/router.log; } >> "$C"
grep -E "FINISH|ttft|rc=|calibrat|policy" "$C" | head -30 >> "$S"
el "integration suite on the CUDA backend"
PKV_TEST_BACKEND=cuda PKV_BIN_DIR=/tmp/pkv/final/bin timeout 120 "$R" generate_integration_test \
  --gtest_brief=1 >> "$C" 2>&1
echo "integration rc=$?" >> "$S"

# 3. End-to-end variants.
el "e2e variants"
E=$OUT/e2e.log
timeout 110 "$R" pkv-bench e2e --shapes llama3-8b,llama3-1b --trace bench/traces/heldout-20260623.tsv \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64 \
  --variants cublas,skinny,pdl,fused,fused+pdl \
  --steps 24 --warmup 4 --out "$OUT/e2e.tsv" > "$E" 2>&1
echo "e2e rc=$?" >> "$S"
sed -n '/byte-floor fraction per variant/,$p' "$E" >> "$S"
timeout 70 "$R" pkv-bench e2e --shapes llama3-8b --trace bench/traces/heldout-20260623.tsv \
  --decode_lines bucketed-B8-N4096,bimodal-B64 --variants cublas,lt --prompts= \
  --steps 24 --warmup 4 --out "$OUT/e2e_lt.tsv" >> "$E" 2>&1
echo "e2e lt rc=$?" >> "$S"

# 4. The route policies against live measurements.
el "policy live"
timeout 100 "$R" pkv-bench policy --live --trace bench/traces/heldout-20260623.tsv \
  --policy_dir policies --out "$OUT/policy_live.tsv" > "$OUT/policy_live.log" 2>&1
echo "policy live rc=$?" >> "$S"
grep -iE "regret|speed-up|worst|geomean" "$OUT/policy_live.log" | head -20 >> "$S"
el done
cat "$S"
