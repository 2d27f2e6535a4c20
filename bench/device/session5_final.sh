#!/usr/bin/env bash
# Closing GPU-machine call of the 2026-12-02 fifth session (main after the router2, w4gemv and
# decodefix merges), within ~480 s, phases in priority order, everything re-tarred into
# $OUT/results.tgz after each phase (a call returns few files):
#   1. device tests of the merged kernels and worker, in parallel on the one GPU (correctness
#      only): CUDA backend (decodefix's per-step FP8 config in the worker), decode 16-bit and FP8,
#      FP8 KV, GEMV (w4gemv), quantized backend; and the FP8 tests of the software-conversion
#      build (sm_80/86 path, bench/device/fp8_software.sh's `sw` bundle);
#   2. pkv-bench e2e 8B: bf16 vs AWQ, B=1 / B=8 at 4k and bimodal B=64, bf16 and FP8 KV;
#   3. placement rerun of the router2 helper (STAGES=C of its script: 4 x 1B workers, prefix vs
#      load-only after a 96-request warm-up without a pause);
#   4. FP8 decode kernels, hardware cvt vs the sm_80/86 bit moves, held-out grid.
# Bundles: .device/fin5.tar.xz (build-sm90 binaries of main), .device/swhw.tar.xz,
# .device/router2.tar.xz. Device call: carry all three, bash bench/device/session5_final.sh
set -u
mkdir -p /tmp/pkv && for b in fin5 swhw router2; do tar -C /tmp/pkv -xJf .device/$b.tar.xz; done
R=/tmp/pkv/fin5/run; SW=/tmp/pkv/sw/run; HW=/tmp/pkv/hw/run
RES=/tmp/res; mkdir -p $RES/tests $RES/e2e $RES/place $RES/fp8sw
S=$RES/summary.txt; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
pack() { tar -C /tmp -czf "$OUT/results.tgz" res; cp "$S" "$OUT/summary.txt"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "revision $(cat /tmp/pkv/fin5/REVISION) (sw bundle $(cat /tmp/pkv/sw/REVISION))"; } > "$S"

el "1. device tests (parallel)"
t() {  # RUNNER TEST SECONDS TAG
  timeout "$3" "$1" "$2" --gtest_brief=1 > "$RES/tests/$4.txt" 2>&1
  echo "rc=$? $4 $(grep -hE '^\[  (PASSED|FAILED) ' "$RES/tests/$4.txt" | tr '\n' ' ')" >> "$RES/tests/rc.txt"
}
for x in cuda_backend_device_test decode_attention_device_test decode_fp8_device_test \
    fp8_kv_device_test gemv_device_test quantized_backend_device_test; do
  t "$R" $x 170 $x &
done
t "$SW" decode_fp8_device_test 170 sw_decode_fp8_device_test &
t "$SW" fp8_kv_device_test 170 sw_fp8_kv_device_test &
wait
cat "$RES/tests/rc.txt" >> "$S"; pack

el "2. e2e 8B bf16 vs AWQ"
timeout 170 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
  --decode_lines bucketed-B1-N4096,uniform-B8,bimodal-B64 --variants cublas,fused+pdl --prompts "" \
  --kv_cache_dtype auto,fp8_e4m3 --quant awq --drift_prompts 0 \
  --out $RES/e2e/e2e.tsv > $RES/e2e/e2e.log 2>&1
echo "e2e rc=$?" >> "$S"
grep -E "step  " $RES/e2e/e2e.log | sed -E 's/ +/ /g' | cut -c1-150 >> "$S"
grep -E "decode route policy" $RES/e2e/e2e.log | sort | uniq -c | head -4 >> "$S"
pack

el "3. placement (router2 STAGES=C)"
OUT=$RES/place STAGES=C timeout 130 bash /tmp/pkv/router2/router2.sh > $RES/place/stdout.txt 2>&1
echo "placement rc=$?" >> "$S"
grep -iE "p90|ratio|hit|prefix|load" $RES/place/summary.txt | head -16 >> "$S"
pack

el "4. FP8 kernels: hw cvt vs sm_80/86 bit moves"
K="--trace bench/traces/heldout-20260623.tsv --routes workqueue,persistent,split --iters 20 --wall_iters 2 --dtype bf16 --configs default --kv_dtype fp8_e4m3"
timeout 70 "$HW" pkv-bench kernels $K --out $RES/fp8sw/kernels_hw.tsv > $RES/fp8sw/kernels_hw.md 2>&1
echo "rc=$? kernels hw" >> "$S"; pack
timeout 70 "$SW" pkv-bench kernels $K --out $RES/fp8sw/kernels_sw.tsv > $RES/fp8sw/kernels_sw.md 2>&1
echo "rc=$? kernels sw" >> "$S"
el done
pack
cat "$S"
