#!/usr/bin/env bash
# The twenty-fourth session's norm-trigger A/B (issue 14): the fused path's RMSNorm launches (the
# one-CTA final norm before the LM head, ~8 us in call33's timelines; B=8's prenorm launches,
# 5-7.5 us) let the next GEMV launch only at their exit (CudaBackendOptions::
# fused_norm_trigger_at_exit, e2e "+normexit"), so its pre-wait weight loads stop queueing ahead
# of the norm's dependent reads. e2e 8B and 1B at B=1 and B=8, two orders.
# Bundle: bash bench/device/bundle.sh nx pkv-bench
# Call: carry [".device/nx.tar.xz"], `bash bench/device/call34.sh` (~1 min). Refuted; the variant
# is not on main: `git apply bench/device/normexit-4be4191.patch` on 4be4191 to rerun.
set -u
source "$(dirname "$0")/common.sh"
start_call nx
D=$RD/nx; mkdir -p "$D"
P=fused+pdl+prenorm
L=(--shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096)
e2e_two_orders "$D" "$P+overlap,$P+normexit+overlap" "${L[@]}"
el done
cat "$S"
