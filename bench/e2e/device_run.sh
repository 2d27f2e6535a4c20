#!/usr/bin/env bash
# One GPU-machine run of the CUDA model backend: device tests, router + worker (--backend=cuda) +
# `pkv generate` on loopback, the integration suite with PKV_TEST_BACKEND=cuda, pkv-bench e2e for
# llama3-8b and llama3-1b, compute-sanitizer memcheck on a subset. Writes logs and TSVs under $OUT.
# Build machine (repo root):
#   B=build-gpumodel/bin; /work/shared/tools/device-bundle /tmp/gmb/gpumodel $B/pkv-worker \
#     $B/pkv-router $B/pkv $B/pkv-make-model $B/pkv-bench $B/cuda_backend_device_test \
#     $B/prefill_attention_device_test $B/sampling_kernel_device_test $B/skinny_gemm_device_test \
#     $B/generate_integration_test
#   strip --strip-debug /tmp/gmb/gpumodel/bin/*; strip --strip-unneeded /tmp/gmb/gpumodel/lib/*
#   (cd /tmp/gmb && tar cJf $OLDPWD/.device/gpumodel.tar.xz gpumodel)   # ~17 MB, fits the 64 MiB
#   cp bench/e2e/device_run.sh .device/run_gpumodel.sh
# GPU machine: bash .device/run_gpumodel.sh   (device tool: carry the two .device files)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
python3 - <<'PY'
import tarfile; tarfile.open('.device/gpumodel.tar.xz').extractall('/tmp/gmb')
PY
B=/tmp/gmb/gpumodel; R="$B/run"
# civetweb (prometheus-cpp's HTTP server) dlopens the unversioned libssl.so / libcrypto.so, which
# the GPU image lacks: without these links the worker's /metrics server fails to start.
ln -sf libssl.so.3 $B/lib/libssl.so; ln -sf libcrypto.so.3 $B/lib/libcrypto.so
# cuBLAS: the toolkit's folder when present, else the pip wheel's (torch's dependency).
CUBLAS=$(python3 -c 'import nvidia.cublas,os;print(os.path.join(nvidia.cublas.__path__[0],"lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="${CUBLAS:+$CUBLAS:}${LD_LIBRARY_PATH:-}"
S="$OUT/summary.txt"
{ el start; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv;
  cat .device/REVISION_gpumodel 2>/dev/null; date -u; ls /usr/local/cuda/lib64 2>/dev/null | grep -c cublas; echo "cublas wheel: $CUBLAS"; } > "$S" 2>&1

el device tests >> "$S"
for tl in prefill_attention_device_test:60 sampling_kernel_device_test:45 skinny_gemm_device_test:45 cuda_backend_device_test:120; do
  t=${tl%%:*}; echo "=== $t" >> "$OUT/device_tests.log"
  timeout ${tl##*:} "$R" $t --gtest_brief=1 >> "$OUT/device_tests.log" 2>&1; echo "rc=$?" >> "$OUT/device_tests.log"
done
grep -E "^===|PASSED|FAILED|rc=" "$OUT/device_tests.log" >> "$S"

el bench >> "$S"
timeout 150 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --out "$OUT/e2e.tsv" > "$OUT/e2e.log" 2>&1
echo "bench rc=$?" >> "$S"

el stream >> "$S"
{ M=/tmp/tiny; "$R" pkv-make-model --out $M --shape tiny;
  "$R" pkv-worker --model=$M --backend=cuda --listen=127.0.0.1:50061 --metrics_listen=127.0.0.1:19101 --kv_pages=4096 > /tmp/worker.log 2>&1 & WP=$!
  "$R" pkv-router --insecure --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:19102 --workers=127.0.0.1:50061 > /tmp/router.log 2>&1 & RP=$!
  for i in $(seq 1 60); do  # readiness: a worker is healthy
    "$R" pkv health --addr 127.0.0.1:50051 --service pkv.v1.Generation >/dev/null 2>&1 && break; sleep 1; done
  timeout 30 "$R" pkv generate --router 127.0.0.1:50051 --prompt "The quick brown fox" --max_tokens 48 --temperature 0; echo "generate rc=$?"
  timeout 30 "$R" pkv generate --router 127.0.0.1:50051 --prompt "Hello" --max_tokens 24 --temperature 0.8 --top_p 0.9 --seed 7 --logprobs --top_logprobs 2; echo "generate2 rc=$?"
  python3 -c "import urllib.request as u;print('\n'.join(l for l in u.urlopen('http://127.0.0.1:19101/metrics').read().decode().splitlines() if l.startswith(('pkv_decode_steps_total','pkv_decode_launches','pkv_kv_cache_pages'))))"
  kill $RP $WP; wait; echo "--- worker log"; tail -20 /tmp/worker.log; echo "--- router log"; tail -5 /tmp/router.log; } > "$OUT/stream.log" 2>&1
grep -E "rc=" "$OUT/stream.log" >> "$S"

el integration >> "$S"
PKV_TEST_BACKEND=cuda PKV_BIN_DIR=$B/bin timeout 120 "$R" generate_integration_test --gtest_brief=1 > "$OUT/integration.log" 2>&1
echo "integration rc=$?" >> "$S"; grep -E "PASSED|FAILED" "$OUT/integration.log" >> "$S"

el sanitizer >> "$S"
{ CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null);
  [ -n "$CS" ] && LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH timeout 70 $CS --tool memcheck --print-limit 5 \
    $B/bin/cuda_backend_device_test --gtest_brief=1 \
    --gtest_filter='*PrefillChunked/llama_d64_BF16_auto:*MixedBatch*/qwen3_d128_F16_auto:*BatchedDecode*/llama_d64_BF16_auto:*PrefillChunked/tiny*' 2>&1 | tail -25; } > "$OUT/sanitizer.log" 2>&1
tail -3 "$OUT/sanitizer.log" >> "$S"
el done >> "$S"
cat "$S"; echo; tail -45 "$OUT/e2e.log"
