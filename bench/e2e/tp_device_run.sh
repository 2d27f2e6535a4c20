#!/usr/bin/env bash
# One single-GPU run for tensor parallelism on the CUDA backend (issue 6): the device tests
# (TP = 2 / 4 with the ranks sharing the GPU, TP = 1 over NCCL with its collectives captured in
# CUDA graphs, the shared-device communicator), then a TP = 1 worker and a TP = 2 worker
# (--tp 2 --tp_devices 0,0) of the tiny model, each behind its own router, answering the same
# greedy `pkv generate` requests (the text must be the same), then a short pkv-tp-bench cuda smoke
# run with every rank on this GPU. Builds nothing; every phase has a timeout and the whole run
# stays under 2 minutes (device tests 55 s, NCCL test 8 s, workers 30 s, bench 20 s at most). Logs and TSVs go to $OUT; $OUT/summary.txt is the overview.
#
# Build machine (repo root), before the device call:
#   ninja -C build-cudatp -j2 cuda_tp_device_test nccl_communicator_test pkv-worker pkv-router \
#     pkv pkv-make-model pkv-tp-bench
#   B=build-cudatp/bin; rm -rf /tmp/tpb; /work/shared/tools/device-bundle /tmp/tpb/tp \
#     $B/cuda_tp_device_test $B/nccl_communicator_test $B/pkv-worker $B/pkv-router $B/pkv \
#     $B/pkv-make-model $B/pkv-tp-bench
#   strip --strip-debug /tmp/tpb/tp/bin/*; strip --strip-unneeded /tmp/tpb/tp/lib/*
#   mkdir -p .device && (cd /tmp/tpb && tar cJf "$OLDPWD/.device/tp.tar.xz" tp)
#   git rev-parse HEAD > .device/REVISION_tp
# GPU machine (device tool, carry [".device/tp.tar.xz", ".device/REVISION_tp"]):
#   bash bench/e2e/tp_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s); BUDGET=112  # seconds for everything after unpacking
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
# A phase's timeout: its cap, or what is left of the budget minus `reserve` for later phases.
cap() { local left=$(( BUDGET - ($(date +%s) - T0) - $2 )); (( left < $1 )) && echo $(( left > 1 ? left : 1 )) || echo "$1"; }
python3 - <<'PY'
import tarfile; tarfile.open('.device/tp.tar.xz').extractall('/tmp/tpb')
PY
R=/tmp/tpb/tp/run
S="$OUT/summary.txt"
export NCCL_NVLS_ENABLE=0  # the code forces it too; the machines require it
{ el start; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  cat .device/REVISION_tp 2>/dev/null; date -u; } > "$S" 2>&1

el device tests >> "$S"
# Not brief: a test cut short by its timeout still leaves every finished test's OK line.
for tl in cuda_tp_device_test:55:55 nccl_communicator_test:8:47; do
  IFS=: read -r t c r <<< "$tl"; echo "=== $t" >> "$OUT/device_tests.log"
  timeout "$(cap "$c" "$r")" "$R" "$t" >> "$OUT/device_tests.log" 2>&1
  echo "rc=$?" >> "$OUT/device_tests.log"
done
grep -E "^===|PASSED|FAILED|SKIPPED \]|rc=" "$OUT/device_tests.log" | grep -v "^\[  SKIPPED \] Models" >> "$S"
echo "tests OK: $(grep -c '^\[       OK \]' "$OUT/device_tests.log")" >> "$S"

el workers >> "$S"
# The phase runs as its own script under a timeout; it records the PIDs it starts so they are
# stopped here whatever happens to it.
PIDS="$OUT/worker_pids"; : > "$PIDS"
cat > /tmp/tp_workers_phase.sh <<'PHASE'
set -u
R=$1; OUT=$2; PIDS=$3
M=/tmp/tiny; "$R" pkv-make-model --out $M --shape tiny >/dev/null
W="--model=$M --backend=cuda --insecure --kv_pages=2048"
"$R" pkv-worker $W --tp 1 --listen=127.0.0.1:50061 --metrics_listen=127.0.0.1:19101 \
  > "$OUT/worker_tp1.log" 2>&1 & echo $! >> "$PIDS"
"$R" pkv-worker $W --tp 2 --tp_devices 0,0 --listen=127.0.0.1:50062 \
  --metrics_listen=127.0.0.1:19103 > "$OUT/worker_tp2.log" 2>&1 & echo $! >> "$PIDS"
"$R" pkv-router --insecure --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:19102 \
  --workers=127.0.0.1:50061 > "$OUT/router_tp1.log" 2>&1 & echo $! >> "$PIDS"
"$R" pkv-router --insecure --listen=127.0.0.1:50052 --metrics_listen=127.0.0.1:19104 \
  --workers=127.0.0.1:50062 > "$OUT/router_tp2.log" 2>&1 & echo $! >> "$PIDS"
for i in $(seq 1 30); do
  # Readiness (the Generation service: SERVING once a worker is healthy), not liveness ("").
  "$R" pkv health --addr 127.0.0.1:50051 --service pkv.v1.Generation >/dev/null 2>&1 &&
    "$R" pkv health --addr 127.0.0.1:50052 --service pkv.v1.Generation >/dev/null 2>&1 && break
  sleep 1
done
echo "healthy after ${i}s"
n=0; same=0
for ids in 1,2,3 5,9,13,21,34 100,200,300,400,17 7; do
  n=$((n + 1))
  for tp in 1 2; do
    timeout 10 "$R" pkv generate --router 127.0.0.1:5005$tp --token_ids $ids --max_tokens 32 \
      --temperature 0 --ignore_eos > "$OUT/gen_${n}_tp$tp.txt" 2> "$OUT/gen_${n}_tp$tp.err"
    echo "prompt $ids tp $tp rc=$? $(tail -1 "$OUT/gen_${n}_tp$tp.err")"
  done
  if cmp -s "$OUT/gen_${n}_tp1.txt" "$OUT/gen_${n}_tp2.txt"; then same=$((same + 1)); fi
done
echo "greedy text identical TP=1 vs TP=2: $same of $n prompts"
# Seeded sampling (rank 0 samples the gathered logits) twice on TP=2: the same text.
for k in a b; do
  timeout 10 "$R" pkv generate --router 127.0.0.1:50052 --token_ids 3,1,4,1,5 --max_tokens 24 \
    --temperature 0.8 --top_p 0.9 --seed 11 > "$OUT/seeded_$k.txt" 2>/dev/null
done
cmp -s "$OUT/seeded_a.txt" "$OUT/seeded_b.txt" && echo "seeded TP=2 repeatable: yes" ||
  echo "seeded TP=2 repeatable: NO"
python3 -c "import urllib.request as u;print('\n'.join(l for l in u.urlopen('http://127.0.0.1:19103/metrics').read().decode().splitlines() if l.startswith(('pkv_decode_steps_total','pkv_generated_tokens_total'))))"
PHASE
timeout "$(cap 30 18)" bash /tmp/tp_workers_phase.sh "$R" "$OUT" "$PIDS" > "$OUT/workers.log" 2>&1
echo "workers phase rc=$?" >> "$OUT/workers.log"
while read -r pid; do kill "$pid" 2>/dev/null; done < "$PIDS"; sleep 1
grep -h "tensor parallel\|cuda backend:" "$OUT/worker_tp2.log" 2>/dev/null | head -4 >> "$OUT/workers.log"
grep -E "healthy|rc=|identical|repeatable|tensor parallel" "$OUT/workers.log" >> "$S"

el tp-bench smoke >> "$S"
timeout "$(cap 20 0)" "$R" pkv-tp-bench cuda --shape llama3-1b --layers 4 --gpus 0 --share_gpu \
  --tp 1,2,4 --batch 1,8 --context 256 --steps 8 --timed_steps 4 \
  > "$OUT/tp_bench_shared_gpu.tsv" 2> "$OUT/tp_bench_shared_gpu.log"
echo "tp-bench rc=$?" >> "$S"; cat "$OUT/tp_bench_shared_gpu.tsv" >> "$S"
el done >> "$S"
cat "$S"
