#!/usr/bin/env bash
# The twenty-first session's call (one start): cfg16 (16-bit w8s3 for one- and two-row steps,
# behind CudaBackendOptions::decode_few_row_w8; rule in cfg16.sh), the persistent layer kernel's
# premise test (layer_probe.cu; prediction in bench/NOTES.md, twenty-first session), served 8B and
# 1B at B=1 with the worker's defaults (issue 14's served figures), and issue 16's kernel table
# as workers run it (the first call ran out of time before it).
# Bundle: for p in layer_probe tma_gemv_probe; do nvcc -O3 -std=c++17 \
#     -gencode=arch=compute_90a,code=sm_90a -o /tmp/probe/$p bench/device/$p.cu; done
#   bash bench/device/bundle.sh cfg16 --add /tmp/probe/layer_probe --add /tmp/probe/tma_gemv_probe \
#     cuda_backend_device_test decode_attention_device_test pkv-bench pkv-worker pkv-router pkv \
#     pkv-make-model
# Call: carry [".device/cfg16.tar.xz"], `bash bench/device/call21.sh` (~5 min; PROBE=0 skips the
# probe; CALL_LIMIT=<the call's timeout_s - 10> when a call gets less than 600 s: the served runs
# and issue 16's table are skipped, not cut, when they no longer fit). On the build machine
# afterwards: python3 bench/kernels/fp8_issue16.py r/issue16/h16.tsv r/issue16/h8.tsv auto and
# python3 bench/device/cfg16_rule.py r/cfg16/e2e_ab1.tsv r/cfg16/e2e_ab2.tsv.
set -u
source "$(dirname "$0")/common.sh"
start_call cfg16
C=$RD/cfg16 P=$RD/probe I=$RD/issue16; mkdir -p "$C" "$P" "$I"
RD=$C device_tests cuda_backend_device_test:200 decode_attention_device_test:200
if [ "${PROBE:-1}" = 1 ]; then
  timeout 90 "$B/bin/layer_probe" 20 > "$P/layer_probe.txt" 2>&1
  echo "rc=$? layer_probe" >> "$S"; grep -E "^(shape|8B|1B|MISMATCH|CUDA)" "$P/layer_probe.txt" |
    cut -c1-150 >> "$S"; pack
fi
# tma_gemv_probe (twenty-second session; prediction in bench/NOTES.md): bulk-copy-fed B=1 GEMV
# beside the engine's GEMV (its chain column) at the 8B and 1B shapes.
if [ "${TMA:-1}" = 1 ] && [ -x "$B/bin/tma_gemv_probe" ]; then
  timeout 120 "$B/bin/tma_gemv_probe" 10 > "$P/tma_gemv_probe.tsv" 2>&1
  echo "rc=$? tma_gemv_probe" >> "$S"
  awk -F'\t' 'NR>2 {print $1, $5, $7, $9, $11, $12}' "$P/tma_gemv_probe.tsv" | cut -c1-100 >> "$S"
  for sh in 8B 1B; do
    timeout 60 "$R" pkv-bench gemv --dtype bf16 --gemv_shapes $sh --tokens 1 --formats dense \
      --input plain \
      --out "$P/gemv_$sh.tsv" > "$P/gemv_$sh.log" 2>&1
    echo "rc=$? gemv $sh" >> "$S"
    awk -F'\t' 'NR>1 && $5=="dense" {print "engine", $1, $13, $14}' "$P/gemv_$sh.tsv" >> "$S"
  done
  pack
fi
W4=fused+pdl+prenorm+w4+overlap W8=fused+pdl+prenorm+w8+overlap  # cfg16.sh's A/B and rule
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
e2e_line "$R" pkv-bench ab1 "$C" "${L[@]}" --variants $W4,$W8; pack
e2e_line "$R" pkv-bench ab2 "$C" "${L[@]}" --variants $W8,$W4; pack
# Issue 16's table as workers run: 16-bit pages on the default config (decode_few_row_w8 off),
# FP8 pages on ChooseKernelConfig's per-step choice.
time_for 200 "issue 16's table" &&
for kv in auto fp8_e4m3; do
  f=$I/h$([ $kv = auto ] && echo 16 || echo 8).tsv
  timeout 120 "$R" pkv-bench kernels --trace bench/traces/heldout-20260623.tsv \
    --routes workqueue,persistent,split --configs $([ $kv = auto ] && echo default || echo auto) \
    --kv_dtype $kv --iters 30 --wall_iters 5 --nofloor --out "$f" >> "$I/sweeps.log" 2>&1
  echo "rc=$? issue16 $kv" >> "$S"; pack
done
for m in "8b llama3-8b" "1b llama3-1b"; do
  read -r tag shape <<< "$m"
  time_for 100 "served $tag" || continue
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$C/make_$tag.log" 2>&1
  echo "rc=$? make $tag" >> "$S"
  serve_model "$tag" /tmp/m-$tag "$C"
  rm -rf /tmp/m-$tag; pack
done
el done
cat "$S"
