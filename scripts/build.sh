#!/usr/bin/env bash
# Configures (once) and builds into $BUILD (default build/).
#   scripts/build.sh          everything: every target, CUDA kernels for every supported
#                             architecture when nvcc is found (what `make test` and CI need)
#   scripts/build.sh demo     only what `make demo`/`make serve` run (router, worker, client,
#                             model maker); the CUDA backend only when a GPU is present (or
#                             PKV_BACKEND=cuda), so a newcomer without one compiles no kernels
# Extra CMake flags: CMAKE_FLAGS="-DPKV_ENABLE_CUDA=OFF" make build
set -euo pipefail
BUILD=${BUILD:-build}
what=${1:-all}
DEMO_TARGETS=(pkv-router pkv-worker pkv-colocated pkv pkv-make-model)

gpu_present() {
  [ "${PKV_BACKEND:-auto}" = cuda ] && return 0
  [ "${PKV_BACKEND:-auto}" = cpu ] && return 1
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

cuda_flag() {  # the PKV_ENABLE_CUDA value this run needs
  if [ "$what" = demo ] && ! gpu_present; then echo OFF; else echo ON; fi
}

configured_cuda() {  # the value the existing configuration has ("" when none)
  [ -f "$BUILD/CMakeCache.txt" ] || return 0
  sed -n 's/^PKV_ENABLE_CUDA:BOOL=//p' "$BUILD/CMakeCache.txt"
}

want=$(cuda_flag)
have=$(configured_cuda)
if [ ! -f "$BUILD/build.ninja" ]; then
  echo "build: configuring $BUILD/ (CUDA $want)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
    -DPKV_ENABLE_CUDA="$want" ${CMAKE_FLAGS:-}
elif [ "$want" = ON ] && [ "$have" = OFF ] && [[ "${CMAKE_FLAGS:-}" != *PKV_ENABLE_CUDA* ]]; then
  # A demo build without a GPU left CUDA off; the full build (tests, CI) compiles the kernels.
  echo "build: turning the CUDA targets on in $BUILD/"
  cmake -S . -B "$BUILD" -DPKV_ENABLE_CUDA=ON >/dev/null
fi

jobs=-j"${JOBS:-$(nproc)}"
if [ "$what" = demo ]; then
  echo "build: compiling ${DEMO_TARGETS[*]} (a few minutes on 2 cores the first time)"
  cmake --build "$BUILD" --target "${DEMO_TARGETS[@]}" -- "$jobs"
else
  echo "build: compiling everything (first build takes a while on 2 cores; CUDA kernels too)"
  cmake --build "$BUILD" -- "$jobs"
fi
