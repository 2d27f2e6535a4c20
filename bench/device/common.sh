# Shared by the GPU-machine scripts in bench/device/ (sourced, not run): unpack a bundle made by
# bench/device/bundle.sh (shared/tools/device-bundle under it), time-stamped summary lines, and a
# local cluster on the GPU.
#   unpack NAME        .device/NAME.tar.xz -> /tmp/pkv/NAME; sets B (bundle) and R (its run)
#   el TEXT            "[Ns] TEXT" into $S
#   start_workers MODEL N FLAG...   N CUDA workers on 50061.. (metrics 9101..); WPIDS, WADDRS;
#                                   the bundle's ${WORKER_BIN:-pkv-worker}
#   start_router FLAG...            a router on 50051 (metrics 9100) over WADDRS; RPID
#   stop_all                        SIGTERM (drain) router and workers, wait for them
#   run_device_tests NAME:SECONDS...  each gtest binary of the bundle under a timeout, into
#                                     $OUT/device_tests.log; rc lines and gtest totals into $S
#   parallel_tests DIR NAME:SECONDS[:FILTER]...  the same, all at once (DIR/NAME.txt each), one
#                                     "rc=... NAME [ PASSED ] ..." line each into $S
#   gemv_line BIN INPUT DIR ARGS...   the bundle's BIN `gemv --dtype bf16 --gemv_shapes 8B --input
#                                     INPUT ARGS` into DIR/gemv_BIN_INPUT.{tsv,log}; rc and one
#                                     "BIN shape tokens format grid chain_us" line a row into $S
#   e2e_summary TAG DIR               one "TAG model B=batch variant step_ms floor_fraction" line per
#                                     decode row of DIR/e2e_TAG.tsv into $S
#   e2e_two_orders DIR LIST ARGS...   e2e_line of the bundle's pkv-bench with --variants LIST (tag
#                                     ab1), then with LIST reversed (ab2), each summarised and
#                                     packed, each skipped when 40 s no longer fit
#   timeline_reports DIR              bench/e2e/timeline_report.py on each DIR/*.tsv (a step
#                                     timeline): per-layer table into $S and FILE.txt, every kernel
#                                     instance into FILE_all.txt
#   e2e_line RUN BIN TAG DIR ARGS...  RUN BIN e2e on the held-out trace (no prompts, no drift) with
#                                     ARGS into DIR/e2e_TAG.{log,tsv}; rc and step lines into $S
#   start_call NAME                   unpack NAME, RD=$OUT/r, and the first summary lines: NAME
#                                     with the bundle's REVISION, then the GPU (el_gpu)
#   el_gpu                            the GPU's name into $S
#   device_tests NAME:SECONDS...      parallel_tests into $RD/tests; their first failure lines into
#                                     $S; pack
#   gemv_tests [NAME:SECONDS...]      device_tests of the GEMV calls' device tests (gemv, quantized
#                                     backend, CUDA backend) and any NAME given
#   e2e_ab DIR ARGS...                e2e_line of pkv-bench-base and pkv-bench, two rounds in
#                                     alternating order (ab_bins), tags BIN_ROUND, packed each
#   gemv_ab DIR "BIN..." ARGS...      gemv_line of each BIN for both inputs (rmsnorm, plain)
#   pack                              $OUT/r into $OUT/results.tgz (what a call brings back)
#   time_for SECONDS TEXT             true when SECONDS more fit before the call's limit
#                                     (CALL_LIMIT, default 590 s from the script's start); else a
#                                     "skipped (no time): TEXT" line into $S and false, so a call
#                                     that runs long drops its last steps instead of its results
#   sweep_into FILE TRACE SMS ROUTES FLAG...  pkv-bench kernels (30 iterations, L2 flushed, no
#                                     floor) of TRACE at SMS (0: all) appended to FILE (one header);
#                                     an rc line into $S; pack
#   ncu_env                           the bundle's and CUDA's libraries on LD_LIBRARY_PATH (ncu
#                                     starts the binary itself) and NCU = the ncu on the machine
#   ncu_gemv BIN TAG FMT SHAPE INPUT  ncu (after ncu_env) on one GemvKernel launch of the bundle's
#                                     BIN `gemv` (one token, FMT, SHAPE, INPUT) into
#                                     DIR=$RD/ncu_TAG.{csv,err}; an rc line into $S
#   ab_bins ROUND                     "pkv-bench-base pkv-bench", reversed in even rounds (A/B
#                                     comparisons alternate which binary runs first)
#   scrape_worker TAG                 worker 0's generated and discarded token totals, the mean of
#                                     its pkv_decode_step_seconds and
#                                     pkv_inter_token_latency_seconds (its /metrics) into $S
#   serve_model TAG MODEL DIR FLAG...  one worker (FLAG...) + router over MODEL, `pkv bench serve`
#                                     of SERVE_REQUESTS (5) 4096-token prompts x 256 tokens at
#                                     concurrency 1 into DIR/serve_TAG.{txt,json} and the worker's
#                                     log DIR/worker_TAG.log; rc and TPOT/ITL/TTFT lines and
#                                     scrape_worker's means into $S
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S=$OUT/summary.txt
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
time_for() {
  [ $(( $(date +%s) - T0 + $1 )) -le "${CALL_LIMIT:-590}" ] && return 0
  el "skipped (no time): $2"; return 1
}
unpack() {
  mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf ".device/$1.tar.xz"
  B=/tmp/pkv/$1; R=$B/run
}
wait_healthy() {  # gives up at once when a started worker has exited (a failed load)
  local p
  for _ in $(seq 1 400); do
    "$R" pkv health --addr "$1" --service "$2" >/dev/null 2>&1 && return 0
    for p in ${WPIDS[@]+"${WPIDS[@]}"}; do
      kill -0 "$p" 2>/dev/null || { echo "exited: worker $p" >> "$S"; return 1; }
    done
    sleep 0.5; done
  echo "not healthy: $1" >> "$S"
}
start_workers() {
  local model=$1 n=$2 i; shift 2; WPIDS=(); WADDRS=()
  for i in $(seq 0 $((n - 1))); do
    "$R" "${WORKER_BIN:-pkv-worker}" --listen=127.0.0.1:$((50061 + i)) --metrics_listen=127.0.0.1:$((9101 + i)) \
      --worker_id=w$i --model="$model" --backend=cuda --insecure --max_model_len=16384 "$@" \
      > /tmp/w$i.log 2>&1 &
    WPIDS+=($!); WADDRS+=("127.0.0.1:$((50061 + i))")
  done
  for a in "${WADDRS[@]}"; do wait_healthy "$a" pkv.v1.Worker; done
}
start_router() {
  "$R" pkv-router --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:9100 --insecure \
    --max_inflight=256 --max_queue=256 --workers="$(IFS=,; echo "${WADDRS[*]}")" "$@" \
    > /tmp/router.log 2>&1 &
  RPID=$!; wait_healthy 127.0.0.1:50051 pkv.v1.Generation
}
stop_all() { kill -TERM ${RPID:-} "${WPIDS[@]}" 2>/dev/null; wait ${RPID:-} "${WPIDS[@]}" 2>/dev/null; RPID=; }
run_device_tests() {
  local T=$OUT/device_tests.log tl t c
  for tl in "$@"; do
    IFS=: read -r t c <<< "$tl"
    [ -x "$B/bin/$t" ] || { echo "missing $t" >> "$S"; continue; }
    echo "=== $t" >> "$T"
    timeout "$c" "$R" "$t" --gtest_brief=1 >> "$T" 2>&1
    echo "rc=$? $t" | tee -a "$T" >> "$S"
  done
  grep -E "PASSED|FAILED|tests ran" "$T" >> "$S"
}
parallel_tests() {
  local dir=$1 tl t c f; shift
  mkdir -p "$dir"
  for tl in "$@"; do
    IFS=: read -r t c f <<< "$tl"
    ( timeout "$c" "$R" "$t" --gtest_brief=1 ${f:+--gtest_filter="$f"} > "$dir/$t.txt" 2>&1
      echo "rc=$? $t $(grep -hE '^\[  (PASSED|FAILED) ' "$dir/$t.txt" | tr '\n' ' ')" > "$dir/$t.rc" ) &
  done
  wait
  for tl in "$@"; do IFS=: read -r t c f <<< "$tl"; cat "$dir/$t.rc" >> "$S"; done
}
gemv_line() {
  local bin=$1 in=$2 dir=$3; shift 3
  timeout 60 "$R" "$bin" gemv --dtype bf16 --gemv_shapes 8B --input "$in" \
    --out "$dir/gemv_${bin}_$in.tsv" "$@" > "$dir/gemv_${bin}_$in.log" 2>&1
  echo "rc=$? gemv $bin $in" >> "$S"
  awk -F'\t' -v b="$bin" 'NR>1 {print b, $1, $4, $5, $7, $13}' "$dir/gemv_${bin}_$in.tsv" >> "$S"
}
# The engine's one-token dense GEMV per 8B and 1B projection, register batch then bulk copies
# (`pkv-bench gemv --nobulk / --bulk`), into DIR/gemv_SHAPE_{nobulk,bulk}.tsv; chain us and the
# fraction of streaming bandwidth per projection into the summary.
gemv_bulk_ab() {
  local D=$1 sh bk
  for sh in 8B 1B; do
    for bk in nobulk bulk; do
      timeout 60 "$R" pkv-bench gemv --dtype bf16 --gemv_shapes $sh --tokens 1 --formats dense \
        --input plain --$bk --out "$D/gemv_${sh}_$bk.tsv" > "$D/gemv_${sh}_$bk.log" 2>&1
      echo "rc=$? gemv $sh $bk" >> "$S"
      awk -F'\t' -v b=$bk 'NR>1 {print b, $1, $13, $14}' "$D/gemv_${sh}_$bk.tsv" >> "$S"
    done
  done
}
e2e_line() {
  local run=$1 bin=$2 tag=$3 dir=$4; shift 4
  timeout 150 "$run" "$bin" e2e --trace bench/traces/heldout-20260623.tsv --prompts "" \
    --drift_prompts 0 --out "$dir/e2e_$tag.tsv" "$@" > "$dir/e2e_$tag.log" 2>&1
  echo "rc=$? e2e $tag" >> "$S"
  grep -E " step " "$dir/e2e_$tag.log" | sed -E 's/ +/ /g' | cut -c1-100 | sed "s/^/$tag /" >> "$S"
}
e2e_summary() {
  awk -F'\t' -v t=$1 '$2=="decode" {printf "%s %s B=%s %s %.4f %.4f\n", t, $1, $4, $6, $9, $15}' \
    "$2/e2e_$1.tsv" >> "$S"
}
e2e_two_orders() {
  local dir=$1 list=$2 reversed tv; shift 2
  reversed=$(echo "$list" | tr ',' '\n' | tac | paste -sd, -)
  for tv in "ab1|$list" "ab2|$reversed"; do
    time_for 40 "e2e ${tv%%|*}" || continue
    e2e_line "$R" pkv-bench "${tv%%|*}" "$dir" "$@" --variants "${tv#*|}"
    e2e_summary "${tv%%|*}" "$dir"
    pack
  done
}
timeline_reports() {
  local f
  for f in "$1"/*.tsv; do
    [ -f "$f" ] || continue
    python3 bench/e2e/timeline_report.py "$f" > "${f%.tsv}.txt" 2>&1
    { echo "== $(basename "$f")"; cat "${f%.tsv}.txt"; } >> "$S"
    python3 bench/e2e/timeline_report.py --all "$f" > "${f%.tsv}_all.txt" 2>&1
  done
}
serve_model() {
  local tag=$1 model=$2 dir=$3; shift 3
  start_workers "$model" 1 --max_model_len=8192 "$@"
  start_router
  timeout 120 "$R" pkv bench serve --router 127.0.0.1:50051 --workload sharegpt \
    --input_len 4096 --output_len 256 --len_sigma 0 --concurrency 1 \
    --num_requests "${SERVE_REQUESTS:-5}" --progress=false --json_out "$dir/serve_$tag.json" \
    > "$dir/serve_$tag.txt" 2>&1
  echo "rc=$? served $tag" >> "$S"
  grep -E "TPOT|ITL|TTFT|errors" "$dir/serve_$tag.txt" | sed "s/^/$tag /" >> "$S"
  scrape_worker "$tag"
  stop_all
  cp /tmp/w0.log "$dir/worker_$tag.log"
}
scrape_worker() {
  python3 - "$1" <<'PY' >> "$S"
import sys, urllib.request, re, collections
tag = sys.argv[1]
text = urllib.request.urlopen("http://127.0.0.1:9101/metrics", timeout=5).read().decode()
acc = collections.defaultdict(float)
for line in text.splitlines():
    m = re.match(r'^(pkv_decode_step_seconds|pkv_inter_token_latency_seconds)_(sum|count)(\{[^}]*\})? ([0-9.eE+-]+)$', line)
    if m: acc[(m.group(1), m.group(2))] += float(m.group(4))
for name in sorted({k[0] for k in acc}):
    c = acc[(name, 'count')]
    if c: print(f"{tag} worker {name} mean {1e3 * acc[(name, 'sum')] / c:.4f} ms n={int(c)}")
for name in ('pkv_generated_tokens_total', 'pkv_tokens_discarded_total'):
    m = re.search(r'^' + name + r'(?:\{\})? ([0-9.eE+-]+)$', text, re.M)
    if m: print(f"{tag} worker {name} {float(m.group(1)):.0f}")
PY
}
e2e_ab() {
  local dir=$1 round bin; shift
  for round in 1 2; do
    for bin in $(ab_bins $round); do
      e2e_line "$R" "$bin" "${bin}_$round" "$dir" "$@"; pack
    done
  done
}
gemv_ab() {
  local dir=$1 bins=$2 in bin; shift 2
  for in in rmsnorm plain; do
    for bin in $bins; do gemv_line "$bin" "$in" "$dir" "$@"; done
    pack
  done
}
ncu_gemv() {
  local bin=$1 tag=$2 fmt=$3 shape=$4 in=$5
  timeout 100 "$NCU" --clock-control none --csv --page raw --kernel-name regex:GemvKernel \
    --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    "$B/bin/$bin" gemv --dtype bf16 --iters 20 --tokens 1 --formats "$fmt" \
    --gemv_shapes "$shape" --input "$in" > "$RD/ncu_$tag.csv" 2> "$RD/ncu_$tag.err"
  echo "rc=$? ncu $tag $(wc -l < "$RD/ncu_$tag.csv") lines" >> "$S"
}
ab_bins() { if [ $(($1 % 2)) = 0 ]; then echo pkv-bench pkv-bench-base; else echo pkv-bench-base pkv-bench; fi; }
ncu_env() {
  local cuda
  cuda=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null | tr '\n' ':')
  export LD_LIBRARY_PATH="$B/lib:$cuda${LD_LIBRARY_PATH:-}"
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  el "ncu: $NCU"
}
start_call() {
  unpack "$1"
  RD=$OUT/r; mkdir -p "$RD"
  el "$1 $(tr '\n' ' ' < "$B/REVISION")"
  el_gpu
}
el_gpu() { el "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"; }
device_tests() {
  parallel_tests "$RD/tests" "$@"
  grep -hE "Failure|FAILED" "$RD"/tests/*.txt | head -5 >> "$S"
  pack
}
gemv_tests() {
  device_tests gemv_device_test:200 quantized_backend_device_test:200 \
    cuda_backend_device_test:240 "$@"
}
pack() { tar -C "$OUT" -czf "$OUT/results.tgz" r; }
sweep_into() {
  local part=$RD/part.tsv file=$1 trace=$2 sms=$3 routes=$4; shift 4
  timeout 120 "$R" pkv-bench kernels --trace "$trace" --sm_count "$sms" --routes "$routes" "$@" \
    --iters 30 --wall_iters 5 --nofloor --out "$part" >> "$RD/sweeps.log" 2>&1
  echo "rc=$? ${file#$RD/} $trace sms=$sms $*" >> "$S"
  if [ -s "$file" ]; then tail -n +2 "$part" >> "$file"; else cat "$part" > "$file"; fi
  rm -f "$part"
  pack
}
