#!/usr/bin/env bash
# cfg16 (16-bit w8s3 for B <= 2: device tests, e2e A/B) and claimswq (claims for workqueue plans:
# device test, fresh A/B sweeps) in one start; rules in cfg16.sh and claimswq.sh. Tests of both
# bundles at once, then every timed run alone. Last, issue 16's kernel table on main's planner
# and configs (cfg16's pkv-bench-base, main's binary: 16-bit and FP8 KV, held-out grid, --configs
# auto; last measured before quota chunks, decode5: 13 of 18 cells >= 512 MiB at 1.8x); on the
# build machine: python3 bench/kernels/fp8_issue16.py r/issue16/h16.tsv r/issue16/h8.tsv auto.
# Results under r/{cfg16,claimswq,issue16}.
# Call: carry [".device/cfg16.tar.xz", ".device/claimswq.tar.xz"], `bash bench/device/call21.sh`
# (~6 min).
set -u
source "$(dirname "$0")/claimswq.sh"
RD=$OUT/r; mkdir -p "$RD"
unpack cfg16; B1=$B; R1=$R
unpack claimswq; B2=$B; R2=$R
el "cfg16 $(tr '\n' ' ' < "$B1/REVISION") claimswq $(tr '\n' ' ' < "$B2/REVISION")"
el "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
C=$RD/cfg16 W=$RD/claimswq; mkdir -p "$C" "$W"
B=$B1 R=$R1 parallel_tests "$C/tests" cuda_backend_device_test:200 decode_attention_device_test:200 &
B=$B2 R=$R2 parallel_tests "$W/tests" decode_attention_device_test:200 &
wait
grep -hE "Failure|FAILED" "$C"/tests/*.txt "$W"/tests/*.txt | head -5 >> "$S"
pack
R=$R1 e2e_ab "$C" --shapes llama3-8b,llama3-1b --decode_lines bucketed-B1-N4096,bucketed-B8-N4096 \
  --variants fused+pdl+prenorm+overlap
R=$R2 claimswq_sweeps "$W"
I=$RD/issue16; mkdir -p "$I"
for kv in auto fp8_e4m3; do  # main's binary (cfg16's pkv-bench-base, 555903a)
  f=$I/h$([ $kv = auto ] && echo 16 || echo 8).tsv
  timeout 120 "$R1" pkv-bench-base kernels --trace bench/traces/heldout-20260623.tsv \
    --routes workqueue,persistent,split --configs auto --kv_dtype $kv --iters 30 --wall_iters 5 \
    --nofloor --out "$f" >> "$RD/sweeps.log" 2>&1
  echo "rc=$? issue16 $kv" >> "$S"; pack
done
el done
cat "$S"
