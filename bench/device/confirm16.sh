#!/usr/bin/env bash
# Sixteenth session's confirming call, after next15 and det_policy (bench/NOTES.md "Sixteenth
# session"): main with prenorm merged and the new defaults (fused_prenorm_min_tokens auto: 4, or 8
# with 4-bit weights; fused_wide_max_tokens 8, so the 8B runs fused up to 8 tokens; split tiles
# the deterministic mode's default; pinned GEMMs without split-K reduction).
#   1. device tests of this tree: GEMV, quantized backend, CUDA backend, determinism;
#   2. e2e, two rounds: 8B and 1B, bf16 / AWQ / FP8, uniform-B2, bucketed-B4 and B8 at 4k, variants
#      pdl (cuBLAS), fused+pdl (no prenorm), fused+pdl+prenorm (the worker's new default);
#   3. e2e 8B B=1 and prefill of 2048 tokens with det-split, then det-fast (pinned GEMMs: their
#      first form failed this prompt with CUBLAS_STATUS_INVALID_VALUE).
# Rules, written before the call: (a) the prenorm / fused defaults stay if the device tests pass
# and fused+pdl+prenorm is not slower than pdl or fused+pdl on any line beyond the two rounds'
# spread; an 8B bf16 line where it loses to pdl sets fused_wide_max_tokens below that B.
# (b) pinned GEMMs become the mode's default only if the determinism test passes, the det-fast
# prefill runs and is faster than det-split's, and det-fast's decode line is not slower.
# Bundle: bash bench/device/bundle.sh confirm16 gemv_device_test quantized_backend_device_test \
#   cuda_backend_device_test determinism_device_test pkv-bench
# Call: carry [".device/confirm16.tar.xz"], `bash bench/device/confirm16.sh` (~5-6 min).
set -u
source "$(dirname "$0")/common.sh"
start_call confirm16
gemv_tests determinism_device_test:200
for round in 1 2; do
  e2e_line "$R" pkv-bench "defaults_$round" "$RD" --shapes llama3-8b,llama3-1b --quant awq,fp8 \
    --variants pdl,fused+pdl,fused+pdl+prenorm --temperature 1 \
    --decode_lines uniform-B2,bucketed-B4-N4096,bucketed-B8-N4096
  pack
done
for v in det-split det-fast; do
  timeout 120 "$R" pkv-bench e2e --trace bench/traces/heldout-20260623.tsv --shapes llama3-8b \
    --decode_lines bucketed-B1-N4096 --variants "$v" --prompts 2048 --drift_prompts 0 \
    --steps 12 --out "$RD/e2e_$v.tsv" > "$RD/e2e_$v.log" 2>&1
  echo "rc=$? e2e $v" >> "$S"
  grep -E " step |TTFT|INTERNAL" "$RD/e2e_$v.log" | sed -E 's/ +/ /g' | cut -c1-110 >> "$S"
  pack
done
el done
cat "$S"
