#!/usr/bin/env bash
# Step pipelining (eighteenth session, not yet run on a GPU): ModelBackend::Launch / Finish with
# the CUDA backend's own overlap (staging, plan and results copies double-buffered, a decode row's
# token fed back from the previous step's device results through the embedding), the engine's
# --overlap_steps, pkv-bench e2e's "+overlap" variants.
#   1. cuda_backend_device_test (PipelinedStepsEqualSerialSteps: 17 model cases, samples and
#      log-probabilities of pipelined steps equal the serial ones'; every earlier case too);
#   2. e2e, 8B and 1B: B=1 / B=8 at 4k (the worker's fused defaults) and bimodal B=64 (pdl), each
#      line A B B A without and with +overlap, one process;
#   3. page locality (the NOTES lead "TLB reach of the KV pool", never run): e2e 8B and 1B,
#      bimodal B=64 and B=1 at 4k, pdl with each row's pages scattered over the whole pool (the
#      bench's default) vs taken in order from page 0 ("+compact", what a fresh worker's page
#      stack hands out), A B B A. Prediction: if address spread costs attention (model attention
#      490 us vs the kernel bench's 437 at bimodal B=64), compact -3..-8% there and ~0 at B=1;
#      the null result is +-1%. A gain would make the page allocator's order a lever (and the
#      e2e's scattered pages a pessimistic stand-in for a served pool). Compact rows are also
#      contiguous runs, so a gain does not separate TLB reach from DRAM-row locality; an
#      allocator that hands a sequence runs of adjacent pages would serve either.
#   4. attention knockout: e2e 8B and 1B at B=1 / 4k, the fused defaults with and without
#      attention launched ("+noattn": outputs wrong, timing only), A B B A. What attention costs
#      on the critical path a layer is the step's difference / layers. Prediction: 8B ~12-14 us a
#      layer (0.40-0.45 ms a step; its isolated kernel takes 14.4 us by events for 3.6 us of
#      bytes), 1B ~9-11 us (0.15-0.18 ms); well below that would mean PDL already hides most of
#      its fixed cost and the lever is elsewhere (the GEMVs). Also on the 8B's AWQ twin.
#   5. served 1B and 8B at concurrency 1 (5 x 4096 prompt x 256 tokens), worker without and with
#      --overlap_steps, client TPOT / ITL and the worker's step and inter-token means.
# Prediction: e2e step (the interval between finishes) loses the host part serial with the GPU:
# 1B B=1 -3..-5% (host_us ~45 of ~1.1 ms), B=8 -3..-4%, 8B B=1 -1..-1.5%, bimodal B=64 -0.3..-1%;
# served TPOT 1B -4..-6% (1.09 -> ~1.03 ms: the engine's postprocess and schedule overlap too),
# 8B -1..-2%. Rule: --overlap_steps becomes the worker's default if the device test passes, no e2e
# line is slower by more than 1% and served TPOT falls on both models.
# Bundle: bash bench/device/bundle.sh overlap18 cuda_backend_device_test pkv-bench pkv-worker \
#   pkv-router pkv pkv-make-model
# Calls (one bundle, two calls back to back so the machine stays warm):
#   carry [".device/overlap18.tar.xz"], `bash bench/device/overlap18.sh` (parts 1, 2, 5; ~7 min)
#   carry [".device/overlap18.tar.xz"], `bash bench/device/overlap18.sh probes` (3, 4; ~4 min)
# (Run at 964b3c0, bench/results/2026-12-05-h100-overlap18. Since then --overlap_steps takes
# auto | on | off and auto, the default, pipelines on the CUDA backend: this script's bare
# --overlap_steps is --overlap_steps=on today, and its "serial" workers need --overlap_steps=off.)
set -u
source "$(dirname "$0")/common.sh"
MODE=${1:-pipelining}
start_call overlap18
el "mode $MODE"
SMALL=bucketed-B1-N4096,bucketed-B8-N4096
F=fused+pdl+prenorm
served() {  # served TAG MODEL FLAG...
  local tag=$1 model=$2; shift 2
  serve_model "$tag" "$model" "$RD" "$@"
  pack
}
if [ "$MODE" = pipelining ]; then  # parts 1, 2 and 5
  device_tests cuda_backend_device_test:200
  e2e_line "$R" pkv-bench small "$RD" --shapes llama3-1b,llama3-8b --decode_lines $SMALL \
    --variants $F,$F+overlap,$F+overlap,$F
  pack
  timeout 60 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b > "$RD/make1b.log" 2>&1
  served 1b-serial /tmp/m1b
  served 1b-overlap /tmp/m1b --overlap_steps
  timeout 200 "$R" pkv-make-model --out /tmp/m8b --shape llama3-8b > "$RD/make8b.log" 2>&1
  el "make 8b rc=$?"
  served 8b-serial /tmp/m8b
  served 8b-overlap /tmp/m8b --overlap_steps
  e2e_line "$R" pkv-bench bimodal "$RD" --shapes llama3-1b,llama3-8b --decode_lines bimodal-B64 \
    --variants pdl,pdl+overlap,pdl+overlap,pdl
  pack
else  # probes: parts 3 and 4
  e2e_line "$R" pkv-bench noattn "$RD" --shapes llama3-8b,llama3-1b \
    --decode_lines bucketed-B1-N4096 --variants $F,$F+noattn,$F+noattn,$F
  pack
  # The same on the 8B's AWQ twin (issue 13: attention is ~19% of its 2.5 ms B=1 step).
  e2e_line "$R" pkv-bench noattn_awq "$RD" --shapes llama3-8b --quant awq \
    --decode_lines bucketed-B1-N4096 --variants $F,$F+noattn,$F+noattn,$F
  pack
  e2e_line "$R" pkv-bench pages "$RD" --shapes llama3-8b,llama3-1b \
    --decode_lines bimodal-B64,bucketed-B1-N4096 --variants pdl,pdl+compact,pdl+compact,pdl
  pack
fi
el done
cat "$S"
