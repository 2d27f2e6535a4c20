#!/usr/bin/env bash
# GEMV early trigger only when the next kernel fills its slots (2026-12-03 ninth session).
# Bundle .device/trig: pkv-bench-base (3f456de, = final9), pkv-bench-rule (branch trig: o, gate/up
# and down trigger early only when the next GEMV has a CTA for every slot), pkv-bench-none (no
# fused GEMV triggers early), cuda_backend_device_test (rule).
# Call: carry [".device/trig.tar.xz"], `bash bench/device/trig.sh` (~2 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack trig
RD=$OUT/r; mkdir -p "$RD"
pack() { tar -C "$OUT" -czf "$OUT/results.tgz" r; }
el "trig"
timeout 200 "$R" cuda_backend_device_test --gtest_brief=1 > "$RD/cuda_backend_device_test.txt" 2>&1
echo "rc=$? cuda_backend_device_test $(grep -hE '^\[  (PASSED|FAILED) ' "$RD/cuda_backend_device_test.txt" | tr '\n' ' ')" >> "$S"
pack
L=(--trace bench/traces/heldout-20260623.tsv --prompts "" --drift_prompts 0
   --shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
   --variants fused+pdl --temperature 1 --quant awq)
for i in 1 2; do
  for v in base rule none; do
    timeout 120 "$R" pkv-bench-$v e2e "${L[@]}" --out "$RD/e2e_${v}_$i.tsv" > "$RD/e2e_${v}_$i.log" 2>&1
    echo "rc=$? $v $i" >> "$S"
    grep -E " step " "$RD/e2e_${v}_$i.log" | sed -E 's/ +/ /g' | cut -c1-90 | sed "s/^/${v}_$i /" >> "$S"
  done
  pack
done
el done
pack
cat "$S"
