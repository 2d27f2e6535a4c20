#!/usr/bin/env bash
# Configures (once) and builds everything into $BUILD (default build/). CUDA targets are built when
# nvcc is found. Extra CMake flags: CMAKE_FLAGS="-DPKV_ENABLE_CUDA=OFF" make build
set -euo pipefail
BUILD=${BUILD:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_FLAGS:-}
fi
echo "build: compiling (first build takes several minutes on 2 cores)"
cmake --build "$BUILD" -- -j"${JOBS:-$(nproc)}"
