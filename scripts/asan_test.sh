#!/usr/bin/env bash
# `make asan-test`: the unit and integration suites under AddressSanitizer (+ LeakSanitizer) and
# UndefinedBehaviorSanitizer, CPU only, in their own build folder ($ASAN_BUILD, default
# build-asan). Child processes (pkv-router, pkv-worker spawned by the integration harness) are
# sanitized too; every report from any process is written under $ASAN_BUILD/sanitizer/ and fails
# the run, as does any failing test. Extra ctest arguments pass through, e.g.
#   scripts/asan_test.sh -R BadInput
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${ASAN_BUILD:-$ROOT/build-asan}
JOBS=${JOBS:-$(nproc)}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPKV_ENABLE_CUDA=OFF \
    -DPKV_SANITIZE=ON -DPKV_FUZZ=OFF
fi
echo "asan-test: building $BUILD (ASan + UBSan)"
cmake --build "$BUILD" -- -j"$JOBS"

REPORTS="$BUILD/sanitizer"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
# log_path: one file per process (<prefix>.<pid>), so reports of spawned servers are kept too.
# A small quarantine and prompt release to the OS keep RSS close to the real footprint, so the
# suites' memory-growth bounds (soak, flood) still mean something under ASan.
export ASAN_OPTIONS="detect_leaks=1:log_path=$REPORTS/asan:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:quarantine_size_mb=16:thread_local_quarantine_size_kb=64:allocator_release_to_os_interval_ms=500"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$REPORTS/ubsan"
export LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0"

status=0
ctest --test-dir "$BUILD" -L unit -LE device -E deploy_ --output-on-failure -j"$JOBS" "$@" || status=1
ctest --test-dir "$BUILD" -L integration -LE device --output-on-failure "$@" || status=1
if compgen -G "$REPORTS/*" >/dev/null; then
  echo "asan-test: sanitizer reports:" >&2
  for f in "$REPORTS"/*; do echo "== $f" >&2; head -60 "$f" >&2; done
  status=1
fi
[ $status = 0 ] && echo "asan-test: unit and integration suites clean under ASan + UBSan"
exit $status
