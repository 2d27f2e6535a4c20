#!/usr/bin/env bash
# The nineteenth session's defaults on a GPU before the session ends: step pipelining
# (--overlap_steps=auto) and quota chunks (PlanOptions::workqueue_quota_chunks) both on.
#   1. decode_attention_device_test and cuda_backend_device_test (every route and the backend's
#      pipelined and serial steps against the CPU reference, plans now with quota chunks);
#   2. e2e 8B bimodal B=64 and zipf B=64 (the lines quota chunks change), pdl, A A (no baseline:
#      this is a check that the defaults run, the A/B figures are policy19's and overlap18's).
# Bundle: bash bench/device/bundle.sh confirm19 decode_attention_device_test \
#   cuda_backend_device_test pkv-bench
# Call: carry [".device/confirm19.tar.xz"], `bash bench/device/confirm19.sh` (~2.5 min). The bundle
# was rebuilt at the nineteenth session's final head (its REVISION says which); not run yet: the
# session's device time was spent.
set -u
source "$(dirname "$0")/common.sh"
start_call confirm19
device_tests decode_attention_device_test:150 cuda_backend_device_test:150
e2e_line "$R" pkv-bench quota "$RD" --shapes llama3-8b --decode_lines bimodal-B64,zipf-B64 \
  --variants pdl,pdl
pack
el done
cat "$S"
