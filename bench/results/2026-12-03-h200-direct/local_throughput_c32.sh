#!/usr/bin/env bash
cd /work/wt/direct
B=build-sm90/bin; M=/tmp/direct-tiny; OUTD=/tmp/direct-tput; rm -rf $OUTD; mkdir -p $OUTD
$B/pkv-colocated --listen=127.0.0.1:51061 --metrics_listen=127.0.0.1:9201 --worker_id=direct --model=$M --backend=cpu --insecure --prefix_caching=false --router_listen=127.0.0.1:51052 --router_max_inflight=256 --router_max_queue=256 > $OUTD/d.log 2>&1 & DP=$!
$B/pkv-colocated --listen=127.0.0.1:51062 --metrics_listen=127.0.0.1:9202 --worker_id=inproc --model=$M --backend=cpu --insecure --prefix_caching=false --router_direct=false --router_listen=127.0.0.1:51053 --router_max_inflight=256 --router_max_queue=256 > $OUTD/i.log 2>&1 & IP=$!
sleep 3
for p in 51052 51053; do $B/pkv health --addr 127.0.0.1:$p --service pkv.v1.Generation; done
for rep in 1 2; do for m in direct inproc; do
  port=$([ $m = direct ] && echo 51052 || echo 51053)
  echo "=== $m $rep" >> $OUTD/tput.log
  timeout 120 $B/pkv bench serve --router 127.0.0.1:$port --target router --workload sharegpt --input_len 32 --output_len 64 --len_sigma 0 --concurrency 32 --num_requests 400 --warmup_requests 40 --progress=false --json_out $OUTD/${m}_$rep.json >> $OUTD/tput.log 2>&1
done; done
kill -TERM $DP $IP; wait $DP $IP
