#!/usr/bin/env bash
# Runs the whole CPU test suite: unit tests in parallel, then the integration tests (real processes
# on loopback) one at a time so timing-sensitive fault tests are not starved on 2 cores.
# GPU tests (label `device`) run on a GPU machine: ctest --test-dir build -L device
set -euo pipefail
BUILD=${BUILD:-build}
ctest --test-dir "$BUILD" -L unit -LE device --output-on-failure -j"${JOBS:-$(nproc)}"
ctest --test-dir "$BUILD" -L integration -LE device --output-on-failure
