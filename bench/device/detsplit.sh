#!/usr/bin/env bash
# Split prefill tiles at fixed key positions (issue 14, deterministic mode; fifteenth session,
# b15d57f, never run on a GPU): the prefill device tests (the new
# PrefillSplitAttentionTest: split tiles against the CPU reference, and bitwise the same for a
# row planned whole, in 300-query chunks and as one-query rows), the FP8 prefill tests (FP8 pages
# run the same kernel template) and the determinism test (unchanged path: a regression check).
# Bundle (~1 min incremental): bash bench/device/bundle.sh detsplit prefill_attention_device_test \
#   prefill_fp8_device_test determinism_device_test
# Call: carry [".device/detsplit.tar.xz"], `bash bench/device/detsplit.sh` (~2-3 min warm).
# Rule: if PrefillSplitAttentionTest fails, fix before wiring the split into the backend; the
# unsplit kernels compile to main's PTX, so a failure of the other cases is not this change.
set -u
source "$(dirname "$0")/common.sh"
start_call detsplit
parallel_tests "$RD/tests" prefill_attention_device_test:200 prefill_fp8_device_test:200 \
  determinism_device_test:400
grep -hE "Failure|FAILED" "$RD"/tests/*.txt | head -5 >> "$S"
pack
cat "$S"
