#!/usr/bin/env bash
# Closing GPU-machine call of the 2026-12-02 fourth session (main after the tpquant, router,
# determinism and w4gemm merges and the FP8 KV policy files), within ~400 s:
#   1. device tests of what the session changed: the CUDA backend, decode (16-bit and FP8), FP8 KV,
#      quantized backend and GEMV/QGemm, CUDA TP (quantized / FP8 KV ranks);
#   2. bench/device/determinism.sh (deterministic mode: device test, served check, cost);
#   3. pkv-bench e2e 8B: bf16 vs FP8 KV (the FP8 route-policy file in use) and AWQ at B=64 / B=1.
# Results are re-tarred into $OUT/results.tgz after every phase (the call returns few files).
# Build machine: cmake --build build-sm90 --target <the binaries below>; device-bundle them into
# .device/fin with determinism.sh, common.sh and the held-out trace; strip; tar+xz.
# Device call: carry [".device/fin.tar.xz"], bash bench/device/session4_final.sh
set -u
mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/fin.tar.xz
D=/tmp/pkv/fin; R=$D/run; RES=/tmp/res; mkdir -p $RES/tests $RES/det $RES/e2e
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
echo "revision $(cat $D/REVISION)" > "$S"

el "device tests"
for tl in cuda_backend_device_test:60 decode_attention_device_test:50 decode_fp8_device_test:45 \
    fp8_kv_device_test:30 quantized_backend_device_test:30 gemv_device_test:40 cuda_tp_device_test:45; do
  IFS=: read -r t c <<< "$tl"
  timeout "$c" "$R" "$t" --gtest_brief=1 > "$RES/tests/$t.txt" 2>&1
  echo "rc=$? $t $(grep -hE '^\[  (PASSED|FAILED) ' $RES/tests/$t.txt | tr '\n' ' ')" >> "$S"
done
pack

el "determinism.sh"
OUT=$RES/det timeout 170 bash $D/determinism.sh > $RES/det/stdout.txt 2>&1
echo "determinism rc=$?" >> "$S"
grep -E "served|batch_invariant|PASSED|FAILED|observation" $RES/det/summary.txt >> "$S" 2>/dev/null
pack

el "e2e 8B"
timeout 110 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
  --decode_lines bimodal-B64,bucketed-B1-N4096,uniform-B8 --variants cublas --prompts "" \
  --kv_cache_dtype auto,fp8_e4m3 --quant awq --drift_prompts 0 \
  --out $RES/e2e/e2e.tsv > $RES/e2e/e2e.log 2>&1
echo "e2e rc=$?" >> "$S"
grep -E "policy:|step  |KV pool" $RES/e2e/e2e.log | grep -v "^I .*decode route " | head -20 >> "$S"
el done
pack
cat "$S"
