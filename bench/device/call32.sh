#!/usr/bin/env bash
# The twenty-fourth session's check of the new bulk default (kFusedBulkAuto = every projection,
# after call31): e2e 8B and 1B at B=1 and B=8, the default against the old auto set (gate/up and
# down) and none, two orders; served 8B and 1B B=1 through router + worker with the defaults;
# the CUDA backend's bulk model cases (CPU oracle).
# Bundle: bash bench/device/bundle.sh served pkv-worker pkv-router pkv pkv-make-model pkv-bench cuda_backend_device_test
# Call: carry [".device/served.tar.xz"], `bash bench/device/call32.sh` (~3.5 min).
set -u
source "$(dirname "$0")/common.sh"
start_call served
C=$RD/all; mkdir -p "$C"
P=fused+pdl+prenorm
A=$P+overlap G=$P+bulk:gateup.down+overlap N=$P+bulk:none+overlap
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
e2e_two_orders "$C" "$A,$G,$N" "${L[@]}"
for shape in 8b 1b; do
  time_for 60 "served $shape" || continue
  timeout 200 "$R" pkv-make-model --out /tmp/m-$shape --shape llama3-$shape > "$C/make_$shape.log" 2>&1
  echo "rc=$? make $shape" >> "$S"
  serve_model "$shape" /tmp/m-$shape "$C"
  grep -m1 -o "bulk GEMV [a-z,]*" "$C/worker_$shape.log" | sed "s/^/$shape /" >> "$S"
  pack
done
time_for 60 "tests" && RD=$C device_tests "cuda_backend_device_test:50:*bulk*"
pack
el done
cat "$S"
