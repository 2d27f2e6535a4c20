#!/usr/bin/env bash
# Eighteenth session: the three prepared seventeenth-session calls in one device start (each start
# refused costs ~90-120 s of the session's budget, so one start carries them all). Each script
# keeps its own rule and bundle and writes under $OUT/NAME (its own results.tgz, packed as it
# goes, so a call cut short still returns what finished):
#   confirm17 (~4 min): the balanced workqueue default end to end (device tests, e2e 8B ragged
#     lines, pdl vs pdl+waves A B B A);
#   claims17 (~3 min, bundle built from branch `claims`): claimed items past the first wave;
#   wqcap (~2 min, bundle built from branch `wqcap`): quota chunks for many-pair batches.
# Bundles (already built; rebuild with the recipe in each script's header, from its branch):
#   .device/confirm17.tar.xz .device/claims17.tar.xz .device/wqcap.tar.xz
# Call: carry those three, `bash bench/device/next18.sh` (~9 min; the per-script timeouts keep it
#   under the 10-minute limit). Then policy18 (second call) after merging what wins.
set -u
here=$(dirname "$0")
OUT=${OUT:-/tmp/out}
part() {  # part NAME SECONDS: bench/device/NAME.sh into $OUT/NAME under a timeout
  mkdir -p "$OUT/$1"
  OUT=$OUT/$1 timeout "$2" bash "$here/$1.sh" > "$OUT/$1/stdout.txt" 2>&1
  echo "rc=$? $1" >> "$OUT/summary.txt"
}
part confirm17 270
part claims17 180
part wqcap 120
cat "$OUT"/*/summary.txt "$OUT/summary.txt"
