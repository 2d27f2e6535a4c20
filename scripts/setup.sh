#!/usr/bin/env bash
# Installs the Debian packages PersistentKV builds and tests with, when they are missing.
#   scripts/setup.sh        everything (build, tests, fuzzing, reference clients)
#   scripts/setup.sh demo   only what `make demo` needs to build and run
# Idempotent and quiet when everything is there. Uses sudo when not root.
set -euo pipefail

# What the binaries build with (CMake also finds GoogleTest at configure time).
PACKAGES=(
  cmake ninja-build g++ pkg-config ccache curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev
  libpcre2-dev libicu-dev libxxhash-dev
  libssl-dev openssl
  libboost-dev nlohmann-json3-dev
)
# What the tests, benchmarks and fuzzers add: clang's libFuzzer, clang-format for the format check,
# a real Prometheus, Node.js for the outside reference clients, python jinja2 (the chat-template
# reference renderer).
if [ "${1:-all}" != demo ]; then
  PACKAGES+=(libbenchmark-dev clang clang-format libclang-rt-14-dev prometheus nodejs npm
            python3-jinja2)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from a Node.js installation outside Debian's packages: that is fine.
if command -v npm >/dev/null 2>&1; then
  keep=(); for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || keep+=("$p"); done
  missing=("${keep[@]}")
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
