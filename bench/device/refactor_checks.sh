#!/usr/bin/env bash
# GPU-machine call of the 2026-12-02 (third) session: issue 15's refactor checks and issue 18's
# router cost, per stage.
#   1. device tests (the CUDA backend split into owned parts, GEMV with 4-bit/fp8 weights, ...);
#   2. the integration suites whose workers run the CUDA backend (the engine moved to
#      worker/engine, its step split, test faults as a backend wrapper);
#   3. pkv-bench e2e before (bundle `old`: pkv-bench built at 4fdf5c9, before the refactor) and
#      after (bundle `s3`: this revision), alternating old/new/old/new in one run;
#   4. a 1B cluster: router vs worker TTFT (pkv bench serve --target both) and where the router's
#      share goes (pkv_router_first_token_stage_seconds{stage}, means and p50 from the buckets),
#      next to the worker's own TTFT histogram.
# Build machine: device-bundle the new binaries into .device/s3 and the old pkv-bench into
# .device/old, strip, tar+xz each. Device call: carry [".device/s3.tar.xz", ".device/old.tar.xz"],
# bash bench/device/refactor_checks.sh
set -u
source "$(dirname "$0")/common.sh"
unpack old
OLD=$R
unpack s3
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION)"; nproc; date -u; } > "$S" 2>&1

el "device tests"
run_device_tests cuda_backend_device_test:150 prefill_attention_device_test:60 \
  decode_attention_device_test:120 sampling_kernel_device_test:40 cuda_tp_device_test:60 \
  gemv_device_test:90 skinny_gemm_device_test:45 quantized_backend_device_test:90

el "integration on the CUDA backend"
I=$OUT/integration_cuda.log
for t in generate_integration_test prefix_cache_integration_test; do
  PKV_TEST_BACKEND=cuda PKV_BIN_DIR=$B/bin timeout 150 "$R" "$t" --gtest_brief=1 >> "$I" 2>&1
  echo "rc=$? $t (cuda)" | tee -a "$I" >> "$S"
done
grep -E "PASSED|FAILED|tests ran" "$I" >> "$S"

el "e2e before/after the refactor (old = 4fdf5c9)"
E2E_ARGS=(--trace bench/traces/heldout-20260623.tsv --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64)
for round in 1 2; do
  for which in old new; do
    bin=$R; [ "$which" = old ] && bin=$OLD
    timeout 120 "$bin" pkv-bench e2e "${E2E_ARGS[@]}" --out "$OUT/e2e_${which}_$round.tsv" \
      > "$OUT/e2e_${which}_$round.log" 2>&1
    echo "e2e $which round $round rc=$?" >> "$S"
    grep -A8 "decode step time" "$OUT/e2e_${which}_$round.log" | sed "s/^/[$which $round] /" >> "$S"
  done
done

el "1B cluster: router cost by stage"
C=$OUT/cluster.log
timeout 120 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b >> "$C" 2>&1
start_workers /tmp/m1b 1 --prefix_caching=false
start_router
{
  for rate in 100 400; do
    echo "--- pkv bench serve --target both, rate $rate"
    timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --worker 127.0.0.1:50061 \
      --target both --workload sharegpt --input_len 32 --output_len 8 --request_rate $rate \
      --num_requests 1000 --metrics_url 127.0.0.1:9100 --progress=false
  done
  echo "--- router first-token stages"
  curl -s 127.0.0.1:9100/metrics | grep -E "^pkv_router_first_token_stage_seconds|^pkv_router_time_to_first_token_seconds_(sum|count)"
  echo "--- worker TTFT"
  curl -s 127.0.0.1:9101/metrics | grep -E "time_to_first_token_seconds_(sum|count)"
} >> "$C" 2>&1
stop_all
python3 - "$C" >> "$S" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for line in text.splitlines():
    if re.search(r"TTFT|overhead", line): print(line)
stages = {}
for m in re.finditer(r'pkv_router_first_token_stage_seconds_(bucket|sum|count)\{([^}]*)\} ([0-9.e+-]+)', text):
    kind, labels, v = m.group(1), m.group(2), float(m.group(3))
    st = re.search(r'stage="(\w+)"', labels).group(1)
    d = stages.setdefault(st, {"b": []})
    if kind == "bucket":
        le = re.search(r'le="([^"]+)"', labels).group(1)
        d["b"].append((float("inf") if le == "+Inf" else float(le), v))
    else:
        d[kind] = v
for st, d in stages.items():
    n = d.get("count", 0)
    if not n: continue
    p50 = next(le for le, c in sorted(d["b"]) if c >= n / 2)
    print(f"stage {st}: n={int(n)} mean={d['sum'] / n * 1e6:.1f} us, p50 <= {p50 * 1e6:.0f} us")
for m in re.finditer(r'^(\S*time_to_first_token_seconds)_(sum|count)(\{[^}]*\})? ([0-9.e+-]+)', text, re.M):
    print(m.group(1), m.group(2), m.group(4))
PY
el done
cat "$S"
