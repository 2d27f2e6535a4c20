#!/usr/bin/env bash
# GPU-machine call 1 of the 2026-12-02 session: correctness of what changed on the CPU machines.
#   1. the device tests (CUDA backend against the CPU oracle: the backend now gets prefill rows
#      starting past 0 over pages another sequence wrote, as the prefix cache shares them);
#   2. the integration suites whose workers run the CUDA backend (PKV_TEST_BACKEND=cuda): generate,
#      and prefix_cache (a cached prompt's greedy tokens and logprobs equal a cache-off worker's);
#   3. Hugging Face's Python `tokenizers`/`transformers` against pkv-tokenize (issue 17: Llama 2,
#      Gemma 3, and the byte-level Llama 3 / Qwen3 files): ids, decode, load and 32k-token encode
#      time on one core (tests/tokenizer/hf_python_agree.py);
#   4. a 1B cluster on the GPU with the OpenAI API: what HTTP costs over gRPC (pkv bench api) and
#      what the router costs over a worker (pkv bench serve --target both), on 16 cores.
# Build machine: device-bundle into .device/s1 (+ tokenizer dirs in .device/s1/tok), tar+xz to
# .device/s1.tar.xz. Device call: carry [".device/s1.tar.xz"], bash bench/device/session_checks.sh
set -u
source "$(dirname "$0")/common.sh"
unpack s1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; nproc; date -u; } > "$S" 2>&1

el "device tests"
run_device_tests cuda_backend_device_test:150 prefill_attention_device_test:60 \
  decode_attention_device_test:120 sampling_kernel_device_test:40 cuda_tp_device_test:60

el "integration on the CUDA backend"
I=$OUT/integration_cuda.log
for t in prefix_cache_integration_test generate_integration_test; do
  PKV_TEST_BACKEND=cuda PKV_BIN_DIR=$B/bin timeout 150 "$R" "$t" --gtest_brief=1 >> "$I" 2>&1
  echo "rc=$? $t (cuda)" | tee -a "$I" >> "$S"
done
grep -E "PASSED|FAILED|tests ran" "$I" >> "$S"

el "HF python tokenizers"
H=$OUT/hf_tokenizers.log
python3 -c "import tokenizers, transformers; print('tokenizers', tokenizers.__version__, 'transformers', transformers.__version__)" >> "$H" 2>&1
timeout 200 python3 tests/tokenizer/hf_python_agree.py --pkv "$B/bin/pkv-tokenize" \
  --model llama2=$B/tok/llama2 --model gemma3=$B/tok/gemma3 \
  --model llama3=$B/tok/llama3 --model qwen3=$B/tok/qwen3 \
  --corpus tests/tokenizer/corpus.jsonl --corpus tests/tokenizer/corpus_hf_only.jsonl \
  --out "$OUT/hf_python_agree.json" >> "$H" 2>&1
echo "hf_python_agree rc=$?" >> "$S"
tail -n 30 "$H" >> "$S"

el "1B cluster: HTTP vs gRPC, router vs worker"
C=$OUT/cluster.log
timeout 120 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b --chat_template chatml >> "$C" 2>&1
"$R" pkv-worker --listen=127.0.0.1:50061 --metrics_listen=127.0.0.1:9101 --worker_id=gpu0 \
  --model=/tmp/m1b --backend=cuda --insecure --max_model_len=8192 > /tmp/worker.log 2>&1 &
WPID=$!
"$R" pkv-router --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:9100 \
  --http_listen=127.0.0.1:8000 --workers=127.0.0.1:50061 --insecure > /tmp/router.log 2>&1 &
RPID=$!
for _ in $(seq 1 240); do
  "$R" pkv health --addr 127.0.0.1:50051 --service pkv.v1.Generation >/dev/null 2>&1 && break
  sleep 0.5
done
el "cluster healthy (or gave up)"
{
  echo "--- chat through HTTP"
  curl -sS http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0}'
  echo; echo "--- pkv bench api (1 token out)"
  timeout 90 "$R" pkv bench api --router 127.0.0.1:50051 --http 127.0.0.1:8000 \
    --api_requests 300 --api_max_tokens 1
  echo "--- pkv bench api (16 tokens out)"
  timeout 90 "$R" pkv bench api --router 127.0.0.1:50051 --http 127.0.0.1:8000 \
    --api_requests 200 --api_max_tokens 16
  echo "--- pkv bench serve --target both (router cost)"
  timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --worker 127.0.0.1:50061 \
    --target both --workload sharegpt --input_len 32 --output_len 8 --request_rate 100 \
    --num_requests 1000 --metrics_url 127.0.0.1:9100 --progress=false
} >> "$C" 2>&1
kill -TERM "$RPID" "$WPID"; wait "$RPID" "$WPID" 2>/dev/null
{ echo "--- worker log"; tail -n 15 /tmp/worker.log; echo "--- router log"; tail -n 10 /tmp/router.log; } >> "$C"
grep -E "^grpc|^http|http - grpc|overhead|TTFT|ttft" "$C" | head -30 >> "$S"
el done
cat "$S"
