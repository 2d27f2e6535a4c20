#!/usr/bin/env bash
# ChooseGemvParts splits unevenly spread tile counts (1B q/k/v: 192 tiles on 132 SMs -> 2 parts)
# (2026-12-03 ninth session). Bundle .device/parts: pkv-bench-base (3f456de = final9), pkv-bench,
# cuda_backend_device_test, gemv_device_test (new). Call: carry [".device/parts.tar.xz"],
# `bash bench/device/parts.sh` (~1 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack parts
RD=$OUT/r; mkdir -p "$RD"
pack() { tar -C "$OUT" -czf "$OUT/results.tgz" r; }
t() {  # TEST SECONDS ARGS...
  local x=$1 s=$2; shift 2
  timeout "$s" "$R" "$x" --gtest_brief=1 "$@" > "$RD/$x.txt" 2>&1
  echo "rc=$? $x $(grep -hE '^\[  (PASSED|FAILED) ' "$RD/$x.txt" | tr '\n' ' ')" >> "$S"
}
t cuda_backend_device_test 120 &
t gemv_device_test 120 --gtest_filter='*Rope*:*Chained*:*Store*' &
wait; pack
L=(--trace bench/traces/heldout-20260623.tsv --prompts "" --drift_prompts 0
   --shapes llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096
   --variants fused+pdl --temperature 1 --quant awq)
for i in 1 2; do
  for v in base new; do
    b=pkv-bench-base; [ $v = new ] && b=pkv-bench
    timeout 60 "$R" $b e2e "${L[@]}" --out "$RD/e2e_${v}_$i.tsv" > "$RD/e2e_${v}_$i.log" 2>&1
    echo "rc=$? $v $i" >> "$S"
    grep -E " step " "$RD/e2e_${v}_$i.log" | sed -E 's/ +/ /g' | cut -c1-90 | sed "s/^/${v}_$i /" >> "$S"
  done
  pack
done
el done
cat "$S"
