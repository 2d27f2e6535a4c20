#!/usr/bin/env bash
# detsplit.sh then policy15.sh in one call (sixteenth session, prepared without a GPU): the two
# share a bundle, and a second call would pay another machine start. policy15 runs only when at
# least 270 s of the call's 600 are left after detsplit (its sweeps take ~2-3 min); its files go
# under $OUT/policy (summary.txt, r/), detsplit's stay where detsplit.sh puts them.
# Bundle: detsplit.sh's header (.device/detsplit.tar.xz). Call: carry [".device/detsplit.tar.xz"],
# `bash bench/device/det_policy.sh`, timeout 600. After it: bench/policy/score_unseen.py on
# files_at/policy/r (policy15.sh's header), python3 bench/device/compare.py on files_at.
set -u
here=$(dirname "$0")
T_START=$(date +%s)
OUT=${OUT:-/tmp/out} bash "$here/detsplit.sh"
left=$(( 600 - ($(date +%s) - T_START) ))
if [ "$left" -ge 270 ]; then
  OUT=$OUT/policy POLICY_BUNDLE=detsplit timeout $(( left - 30 )) bash "$here/policy15.sh"
else
  echo "policy15 skipped: ${left}s left" >> "$OUT/summary.txt"
fi
tar -C "$OUT" --exclude results.tgz -czf "$OUT/results.tgz" .
