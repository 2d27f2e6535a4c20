#!/usr/bin/env bash
# Route-policy data for issue 14's unseen-grid bar (fifteenth session, prepared without a GPU):
# pkv-bench kernels sweeps (16-bit pages, every route, 30 iterations, L2 flushed) with this
# revision's kernels of
#   the calibration grid (seed 20260622, the only fitting data) at 132, 66 and 28 SMs,
#   the unseen grid bench/traces/unseen-20261204.tsv (generated before any of it was measured) at
#   132 and 66 SMs, and the held-out and third grids at 132 and 66 (continuity with run 3).
# The sweeps of 2026-11-29 (run 3) predate decode3-decode5's kernel and planner changes, so the
# policy files are refitted on the fresh calibration sweep first. Rule, fixed before the grid was
# measured (bench/traces/README.md): fit with `pkv-bench calibrate` defaults (or the v3 variant,
# if the v2 CV rule picks it) on sweep_calibration.tsv only, score once on sweep_unseen.tsv; bar:
# learned worst-cell regret <= 1.05 at 132 and 66 SMs. After the call, on the build machine (no
# GPU), one command runs fit, choice and score in the rule's order (it reproduces run 3's
# held-out 1.058 / 1.298 and v3's rejection from run 3's sweeps):
#   bench/policy/score_unseen.py --bench build/bin/pkv-bench --sweeps <results>/r --out /tmp/pol15
# By hand, the same steps:
#   R=<results>/r; T=bench/traces; B=build/bin/pkv-bench; mkdir -p /tmp/pol15/base /tmp/pol15/v3
#   $B calibrate --measurements=$R/sweep_calibration.tsv --traces=$T/calibration-20260622.tsv \
#     --out_dir=/tmp/pol15/base --cv=true > base.txt
#   C=log_bytes_per_slot_sq,log_wq_imbalance,fill,len_cv,mean_over_max,log2_batch,log_pair_mib,log_fused_imbalance
#   $B calibrate ... --out_dir=/tmp/pol15/v3 --cv=true --candidates=$C,long_frac,long_token_frac > v3.txt
#   (choose by the v2 rule from the two files' cv lines, then, once:)
#   $B policy --measurements=$R/sweep_unseen.tsv --traces=$T/unseen-20261204.tsv \
#     --policy_dir=/tmp/pol15/<chosen> --cells=0 --out=unseen.md
# Bundle: any with pkv-bench of this revision, e.g. .device/detsplit.tar.xz (detsplit.sh's
# header). Call: carry [".device/detsplit.tar.xz"], `bash bench/device/policy15.sh` (~2-3 min).
set -u
source "$(dirname "$0")/common.sh"
start_call "${POLICY_BUNDLE:-detsplit}"
sweep() {  # sweep OUT_NAME TRACE_FILE SMS
  local part=$RD/part.tsv
  timeout 90 "$R" pkv-bench kernels --trace "$2" --sm_count "$3" \
    --routes fused,split,workqueue,bucketed-exact,persistent --iters 30 --wall_iters 5 \
    --nofloor --out "$part" >> "$RD/sweeps.log" 2>&1
  echo "rc=$? $1 $2 sms=$3" >> "$S"
  if [ -s "$RD/$1" ]; then tail -n +2 "$part" >> "$RD/$1"; else cat "$part" > "$RD/$1"; fi
  rm -f "$part"
  pack
}
T=bench/traces
for sms in 0 66 28; do sweep sweep_calibration.tsv $T/calibration-20260622.tsv $sms; done
for sms in 0 66; do sweep sweep_unseen.tsv $T/unseen-20261204.tsv $sms; done
for sms in 0 66; do sweep sweep_heldout.tsv $T/heldout-20260623.tsv $sms; done
for sms in 0 66; do
  sweep sweep_third.tsv bench/results/2026-11-29-h200-run3/third-20260701.tsv $sms
done
el done
cat "$S"
