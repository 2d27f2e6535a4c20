#!/usr/bin/env bash
# GPU-machine call for the deterministic (batch-invariant) mode (issue 14), < 200 s:
#   1. determinism_device_test: four sequences alone / together / chunked with a one-token chunk /
#      recomputed, bitwise logits (Forward) and greedy + seeded tokens and log-probabilities
#      (Step, CUDA graphs) in deterministic mode; the default mode's differences printed
#      ("observation:" lines), not asserted;
#   2. a served check through router + one CUDA worker (llama3-1b random weights), default and
#      --deterministic: four prompts each alone, then all four at once (greedy and seeded), outputs
#      compared; `pkv info` shows batch_invariant;
#   3. the cost: pkv-bench e2e, 8B and 1B at B=1 (4k), B=8 (4k), bimodal B=64, variants pdl (the 8B
#      worker's default), fused+pdl (the 1B worker's default), det, and det-split, det-pinned,
#      det-fast (the faster parts, alone and together), side by side in one run, plus prefill of
#      2048 tokens with and without (model "<shape>+det-fast"). DET_SPLIT=1 adds a served round
#      with --deterministic_split_tiles --deterministic_pinned_gemm ("split").
# Build machine (worktree root, CUDA build with the sm_90a gencode):
#   cmake --build build --target determinism_device_test pkv-bench pkv-worker pkv-router pkv \
#     pkv-make-model -- -j2
#   B=build/bin; /work/shared/tools/device-bundle /work/main/.device/det $B/determinism_device_test \
#     $B/pkv-bench $B/pkv-worker $B/pkv-router $B/pkv $B/pkv-make-model   (binaries stripped)
#   cp bench/device/determinism.sh bench/device/common.sh bench/traces/heldout-20260623.tsv \
#     /work/main/.device/det/; git rev-parse HEAD > /work/main/.device/det/REVISION
#   cd /work/main/.device && XZ_OPT="-9 -T1" tar -cJf det.tar.xz det
# Device call: carry [".device/det.tar.xz"],
#   mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf .device/det.tar.xz && bash /tmp/pkv/det/determinism.sh
set -u
source "$(dirname "$0")/common.sh"
B=$(cd "$(dirname "$0")" && pwd); R=$B/run
[ -d "$B/bin" ] || unpack "${DET_BUNDLE:-det}"  # DET_BUNDLE: another bundle with these binaries
TRACE=$B/heldout-20260623.tsv; [ -f "$TRACE" ] || TRACE=bench/traces/heldout-20260623.tsv
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "revision $(cat $B/REVISION 2>/dev/null)"; date -u; } > "$S" 2>&1

el "device test"
run_device_tests determinism_device_test:240
grep -E "^observation|differs from alone" "$OUT/device_tests.log" | head -40 >> "$S"

el "served: 4 prompts alone, then together"
C=$OUT/served.log
timeout 60 "$R" pkv-make-model --out /tmp/m1b --shape llama3-1b >> "$C" 2>&1
PROMPTS=()
for i in 0 1 2 3; do  # token-id prompts of 200..500 tokens
  PROMPTS+=("$(python3 -c "import random; r=random.Random($i); print(','.join(str(r.randrange(1000, 100000)) for _ in range(200 + 100 * $i)))")")
done
gen() {  # gen OUTFILE PROMPT SAMPLING...
  local out=$1 p=$2; shift 2
  timeout 30 "$R" pkv generate --router 127.0.0.1:50051 --token_ids "$p" --max_tokens 48 \
    --ignore_eos --logprobs "$@" > "$out" 2> "$out.err"
  grep -o "mean logprob.*" "$out.err" >> "$out"  # the text and the mean log-probability compared
}
for mode in default deterministic ${DET_SPLIT:+split}; do
  flag=; [ $mode = deterministic ] && flag=--deterministic
  [ $mode = split ] && flag="--deterministic --deterministic_split_tiles --deterministic_pinned_gemm"
  start_workers /tmp/m1b 1 --kv_memory_fraction=0.3 $flag
  start_router
  "$R" pkv info --addr 127.0.0.1:50061 2>&1 | grep -E "batch_invariant" | sed "s/^/$mode /" >> "$S"
  for sampling in "--temperature 0" "--temperature 0.8 --top_p 0.95 --seed 7"; do
    D=$OUT/served-$mode-${sampling// /_}; mkdir -p "$D"
    for i in 0 1 2 3; do gen "$D/alone$i" "${PROMPTS[$i]}" $sampling; done
    # `wait` on the generations' pids only: a bare wait would also wait for the router and worker.
    G=(); for i in 0 1 2 3; do gen "$D/together$i" "${PROMPTS[$i]}" $sampling & G+=($!); done
    wait "${G[@]}"
    # A second together round, staggered so prefill chunks land inside the others' decode steps.
    G=(); for i in 0 1 2 3; do (sleep 0.0$((3 * i)); gen "$D/stagger$i" "${PROMPTS[$i]}" $sampling) & G+=($!); done
    wait "${G[@]}"
    n=0; for i in 0 1 2 3; do for m in together stagger; do
      cmp -s "$D/alone$i" "$D/$m$i" || n=$((n + 1)); [ -s "$D/alone$i" ] || echo "empty output $D/alone$i" >> "$S"
    done; done
    echo "served $mode [$sampling]: $n of 8 (prompt, mix) outputs differ from alone" >> "$S"
  done
  stop_all
done

el "e2e: deterministic vs default, 8B and 1B"
timeout 300 "$R" pkv-bench e2e --trace "$TRACE" --shapes llama3-8b,llama3-1b \
  --decode_lines bucketed-B1-N4096,bucketed-B8-N4096,bimodal-B64 \
  --variants pdl,fused+pdl,det,det-split,det-pinned,det-fast \
  --prompts 2048 --steps 12 --out "$OUT/e2e_det.tsv" > "$OUT/e2e_det.log" 2>&1
echo "e2e rc=$?" >> "$S"
[ -f "$OUT/e2e_det.tsv" ] && cut -f1-6,9,11,15,21 "$OUT/e2e_det.tsv" >> "$S"
el done
cat "$S"
