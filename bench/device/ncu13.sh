#!/usr/bin/env bash
# 2026-12-04 thirteenth session: why the cp.async weight ring streams slower than the register
# batch (cpring2: dense gate/up T=1 plain 59.4 -> 82.5 us with 4-unit chunks in 2 slots). ncu on
# the isolated 8B gate/up, one token, plain input, dense and fp8: main (pkv-bench-base) vs c4s2
# and c2s3. Call: carry [".device/cpring2.tar.xz"], `bash bench/device/ncu13.sh` (~2.5 min warm).
set -u
source "$(dirname "$0")/common.sh"
unpack cpring2
RD=$OUT/r; mkdir -p "$RD"
ncu_env
for bin in pkv-bench-base pkv-bench-c4s2 pkv-bench-c2s3; do
  for fmt in dense fp8; do
    ncu_gemv "$bin" "${bin#pkv-bench-}_$fmt" $fmt "8B gate/up" plain
    pack
  done
done
el done
cat "$S"
