#!/usr/bin/env bash
# Prepared in the 2026-12-03 tenth session for the next one (not run: device time spent).
# Branch `floor` (3729200): small steps' split floor at every row length
# (PlanOptions::exact_min_split). Why: final10 / serve1b showed the 1B's -4% at exactly 4096
# tokens missing from served TPOT, whose rows are 4097-4352 tokens, where the power-of-two length
# bucket halves the floor (30 splits of 9 pages instead of 16 of 16). Prediction: served 1B TPOT
# 1.11-1.14 -> ~1.07 ms; 8B within noise; e2e lines at powers of two unchanged.
# Bundle .device/floor: the branch's pkv-bench, pkv-worker, pkv-router, pkv, pkv-make-model, and
# main's (1c72fbd code) pkv-bench-base, pkv-worker-base. Call: carry [".device/floor.tar.xz"],
# `bash bench/device/floor.sh` (~8 min warm). Merge only if served 1B is faster and no e2e line
# slower; the kernel-grid rule (pkv-bench kernels) is untouched (the flag is the worker's).
set -u
source "$(dirname "$0")/common.sh"
unpack floor
RD=$OUT/r; mkdir -p "$RD"
el "floor $(cat $B/REVISION)"
L=(--shapes llama3-8b,llama3-1b --variants fused+pdl,pdl --temperature 1
   --decode_lines bucketed-B1-N4096,uniform-B1,bimodal-B2,bucketed-B4-N4096,bucketed-B8-N4096)
for i in 1 2; do
  for bin in $(ab_bins $i); do e2e_line "$R" $bin "${bin}_$i" "$RD" "${L[@]}"; done
  pack
done
for m in "1b llama3-1b" "8b llama3-8b"; do
  read -r tag shape <<< "$m"
  timeout 200 "$R" pkv-make-model --out /tmp/m-$tag --shape $shape > "$RD/make_$tag.log" 2>&1
  for i in 1 2; do
    for w in pkv-worker-base pkv-worker; do
      WORKER_BIN=$w serve_model "${tag}_${w}_$i" /tmp/m-$tag "$RD"
    done
  done
  rm -rf /tmp/m-$tag; pack
done
el done
cat "$S"
