# Shared by the GPU-machine scripts in bench/device/ (sourced, not run): unpack a bundle made by
# shared/tools/device-bundle, time-stamped summary lines, and a local cluster on the GPU.
#   unpack NAME        .device/NAME.tar.xz -> /tmp/pkv/NAME; sets B (bundle) and R (its run)
#   el TEXT            "[Ns] TEXT" into $S
#   start_workers MODEL N FLAG...   N CUDA workers on 50061.. (metrics 9101..); WPIDS, WADDRS
#   start_router FLAG...            a router on 50051 (metrics 9100) over WADDRS; RPID
#   stop_all                        SIGTERM (drain) router and workers, wait for them
#   run_device_tests NAME:SECONDS...  each gtest binary of the bundle under a timeout, into
#                                     $OUT/device_tests.log; rc lines and gtest totals into $S
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S=$OUT/summary.txt
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
unpack() {
  mkdir -p /tmp/pkv && tar -C /tmp/pkv -xJf ".device/$1.tar.xz"
  B=/tmp/pkv/$1; R=$B/run
}
wait_healthy() {
  for _ in $(seq 1 400); do
    "$R" pkv health --addr "$1" --service "$2" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "not healthy: $1" >> "$S"
}
start_workers() {
  local model=$1 n=$2; shift 2; WPIDS=(); WADDRS=()
  for i in $(seq 0 $((n - 1))); do
    "$R" pkv-worker --listen=127.0.0.1:$((50061 + i)) --metrics_listen=127.0.0.1:$((9101 + i)) \
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
