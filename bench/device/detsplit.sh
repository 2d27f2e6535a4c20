#!/usr/bin/env bash
# The deterministic mode's faster parts (issue 14; fifteenth session, never run on a GPU): split
# prefill tiles for every attention row, and pinned cuBLASLt GEMMs (DeterministicForm).
#   1. determinism.sh on this bundle: determinism_device_test (bitwise alone / together / chunked /
#      recomputed, the first form and each faster one: TheFasterFormsAreAlsoIndependentOfTheBatch),
#      the served 4-prompt check with --deterministic and with both faster parts ("split"), and
#      pkv-bench e2e with det, det-split, det-pinned, det-fast beside pdl and fused+pdl;
#   2. the prefill device tests: PrefillSplitAttentionTest (split tiles against the CPU reference,
#      and bitwise the same for a row planned whole, in 300-query chunks and as one-query rows)
#      and fp8_kv_device_test (the FP8 prefill tests, split tiles over FP8 pages among them).
# Bundle (~2 min incremental; rebuilt at 8e206b6+ in the sixteenth session):
#   bash bench/device/bundle.sh detsplit determinism_device_test pkv-bench pkv-worker pkv-router \
#     pkv pkv-make-model prefill_attention_device_test fp8_kv_device_test
# Call: carry [".device/detsplit.tar.xz"], `bash bench/device/detsplit.sh` (~4 min warm).
# Predictions (bench/NOTES.md "Fifteenth session"): det-split 8B B=1 ~1.08-1.12x pdl (det ~2.1x),
# B=8 alike, bimodal B=64 ~1.2-1.4x (det ~4.6x; split tiles pack a KV head's q heads); det-pinned: decode lines as det, prefill 2048 2.6x ->
# ~1.2-1.5x; every determinism and prefill case passes. Rule: a part whose tests all pass and
# whose e2e lines are all faster than det becomes the mode's default (DeterministicForm,
# WorkerOptions); any failure keeps it off until fixed.
set -u
DET_BUNDLE=detsplit DET_SPLIT=1 bash "$(dirname "$0")/determinism.sh"
source "$(dirname "$0")/common.sh"
B=/tmp/pkv/detsplit; R=$B/run
RD=$OUT/r; mkdir -p "$RD"
parallel_tests "$RD/tests" prefill_attention_device_test:200 fp8_kv_device_test:200
grep -hE "Failure|FAILED" "$RD"/tests/*.txt | head -5 >> "$S"
tar -C "$OUT" --exclude results.tgz -czf "$OUT/results.tgz" .  # determinism.sh's files too
cat "$S"
