#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) in $FUZZ_BUILD and runs each for
# $FUZZ_SECONDS on a scratch copy of its seed corpus (fuzz/corpus/<target>/, never written to).
# Fails when a target finds a crash, leak, timeout or sanitizer report; the reproducer is left in
# $FUZZ_BUILD/artifacts/. `FUZZ_SECONDS=0` only replays the seed corpus.
#   scripts/fuzz.sh                      # 15 s per target (the ctest fuzz_smoke)
#   FUZZ_SECONDS=600 scripts/fuzz.sh     # RELIABILITY P6 nightly: 10 min per target
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${FUZZ_BUILD:-$ROOT/build/fuzz}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-15}
TARGETS=(request_validation safetensors_header model_config tokenizer openai_request chat_template)
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (apt-get install clang)" >&2; exit 1; }

if [ ! -f "$OUT/build.ninja" ]; then
  cmake -S "$ROOT/fuzz" -B "$OUT" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    >"$OUT.configure.log" 2>&1 || { cat "$OUT.configure.log" >&2; exit 1; }
fi
cmake --build "$OUT" -- -j"${JOBS:-$(nproc)}" >"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log" >&2; exit 1; }

mkdir -p "$OUT/artifacts"
failed=0
for t in "${TARGETS[@]}"; do
  work="$OUT/corpus/$t"
  mkdir -p "$work"
  if [ "$SECONDS_PER_TARGET" -gt 0 ]; then
    args=(-max_total_time="$SECONDS_PER_TARGET" "$work" "$ROOT/fuzz/corpus/$t")
  else
    args=(-runs=0 "$ROOT/fuzz/corpus/$t")
  fi
  if "$OUT/fuzz_$t" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$OUT/artifacts/$t-" "${args[@]}" >"$OUT/$t.log" 2>&1; then
    echo "fuzz $t: ok ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$OUT/$t.log" | grep -o '[0-9]*$') runs)"
  else
    echo "fuzz $t: FAILED (log $OUT/$t.log, reproducer in $OUT/artifacts/)" >&2
    grep -E -A25 "ERROR: |runtime error|SUMMARY" "$OUT/$t.log" | head -60 >&2 || tail -40 "$OUT/$t.log" >&2
    failed=1
  fi
done
exit $failed
