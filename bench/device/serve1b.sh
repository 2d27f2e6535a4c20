#!/usr/bin/env bash
# Is the served 1B B=1 step host-bound? (2026-12-03 tenth session: final10 measured e2e 1.130 ->
# 1.085 ms but served TPOT 1.14 both before and after.) One 1B worker served twice: the learned
# policy (256-token splits at 4k since 65a5e16) and fixed:split:128 (the former 128-token floor).
# Bundle .device/final10. Call: carry [".device/final10.tar.xz"], `bash bench/device/serve1b.sh`.
set -u
source "$(dirname "$0")/common.sh"
unpack final10
RD=$OUT/r; mkdir -p "$RD"
timeout 100 "$R" pkv-make-model --out /tmp/m-1b --shape llama3-1b > "$RD/make.log" 2>&1
SERVE_REQUESTS=4
for run in learned_1 fixed:split:128 learned_2; do
  serve_model "${run//:/_}" /tmp/m-1b "$RD" --decode_policy="${run%_[12]}"
done
tar -C "$OUT" -czf "$OUT/results.tgz" r
cat "$S"
