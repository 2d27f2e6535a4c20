#!/usr/bin/env bash
# First GPU-machine call for the session after 2026-12-03's eighth (prepared then, not run: the
# device budget was spent). Bundles (build box, sm_90a build dir build-sm90, main's HEAD):
#   device-bundle .device/next9 pkv-bench cuda_backend_device_test decode_attention_device_test \
#     decode_fp8_device_test fp8_kv_device_test gemv_device_test quantized_backend_device_test \
#     sampling_kernel_device_test; strip .device/next9/bin/*; git rev-parse HEAD > REVISION;
#   cd .device && XZ_OPT="-9 -T2" tar -cJf next9.tar.xz next9
#   .device/qgemm2b.tar.xz: helper qgemm2's v3 bundle (its go.sh; bench/device/qgemm2b.sh).
# Call: carry [".device/next9.tar.xz", ".device/qgemm2b.tar.xz"], command
#   `bash bench/device/next9.sh` (~4 min warm). Phases, results re-packed after each:
#   1. the merged main's device tests, in parallel (sampler, decode5 and qgemm2 were each tested
#      only on their own branch);
#   2. what a filtered draw costs: e2e 8B and 1B, B=1 4k and bimodal B=64, fused+pdl, at
#      temperature 0, temperature 1, temperature 1 with top_p 0.9 (the top-p search still runs
#      in one CTA a row: prediction 0.1-0.5 ms a step);
#   3. 8B fused vs cuBLAS at 2, 4 and 8 rows (the default runs fused only at 1, measured there);
#   4. qgemm2's v3 (merge by part, 16 warps at 64 tokens): its own go.sh.
set -u
source "$(dirname "$0")/common.sh"
unpack next9
RD=$OUT/r; mkdir -p "$RD/tests"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "revision $(cat $B/REVISION)"; } > "$S"

el "1. device tests (parallel)"
t() {  # TEST SECONDS
  timeout "$2" "$R" "$1" --gtest_brief=1 > "$RD/tests/$1.txt" 2>&1
  echo "rc=$? $1 $(grep -hE '^\[  (PASSED|FAILED) ' "$RD/tests/$1.txt" | tr '\n' ' ')" >> "$RD/tests/rc.txt"
}
for x in cuda_backend_device_test decode_attention_device_test decode_fp8_device_test \
    fp8_kv_device_test gemv_device_test quantized_backend_device_test sampling_kernel_device_test; do
  t $x 200 &
done
wait
cat "$RD/tests/rc.txt" >> "$S"; pack

e2e() {  # TAG ARGS...
  local tag=$1; shift
  timeout 150 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
    --drift_prompts 0 --out "$RD/e2e_$tag.tsv" "$@" > "$RD/e2e_$tag.log" 2>&1
  echo "rc=$? e2e $tag" >> "$S"
  grep -E " step " "$RD/e2e_$tag.log" | sed -E 's/ +/ /g' | cut -c1-110 | sed "s/^/$tag /" >> "$S"
}
el "2. sampling: greedy, temperature 1, top_p 0.9"
SAMP=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bimodal-B64 --variants fused+pdl,cublas)
e2e t0 "${SAMP[@]}"
e2e t1 "${SAMP[@]}" --temperature 1
e2e t1p09 "${SAMP[@]}" --temperature 1 --top_p 0.9
pack

el "3. 8B fused vs cuBLAS at 2-8 rows"
e2e rows --shapes llama3-8b --decode_lines uniform-B2,bucketed-B4-N4096,bucketed-B8-N4096 \
  --variants cublas,fused+pdl
pack

el "4. qgemm2 v3"
if [ -f .device/qgemm2b.tar.xz ]; then
  tar -C /tmp/pkv -xJf .device/qgemm2b.tar.xz
  mkdir -p "$RD/qgemm2b"; OUT=$RD/qgemm2b timeout 200 bash /tmp/pkv/qgemm2b/go.sh > "$RD/qgemm2b.txt" 2>&1
  echo "rc=$? qgemm2b" >> "$S"; tail -30 "$RD/qgemm2b/summary.txt" >> "$S"
fi
el done
pack
cat "$S"
