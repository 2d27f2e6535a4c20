#!/usr/bin/env python3
"""FP8 vs 16-bit KV per held-out cell, from one `pkv-bench kernels --kv_dtype auto,fp8_e4m3` run.

usage: fp8_speedup.py KERNELS.md SIZES.tsv
  KERNELS.md  the run's printed table (best route of each dtype per line is compared)
  SIZES.tsv   any --out TSV of the same grid (16-bit rows give each line's KV bytes and the
              streaming bandwidth)
Prints per line the best 16-bit and FP8 GPU times, the speedup and the FP8 time's fraction of
streaming bandwidth counting FP8 bytes, then the issue-16 buckets (>= 512 MiB, 64-512, < 64 by
16-bit size).
"""
import collections
import csv
import sys


def main(md_path, tsv_path):
    sizes, stream = {}, 0.0
    for r in csv.DictReader(open(tsv_path), delimiter="\t"):
        if "fp8" not in r["variant"]:
            sizes[r["trace"]] = int(r["kv_bytes"])
            stream = float(r["stream_gbps"])
    times = collections.defaultdict(dict)
    for line in open(md_path):
        p = line.split()
        if len(p) < 5 or p[0].startswith("#") or p[0] == "trace":
            continue
        try:
            times[p[0]][(p[1], p[2])] = float(p[3])
        except ValueError:
            pass
    rows = []
    for name, v in times.items():
        b = min(t for (_, c), t in v.items() if "fp8" not in c)
        f, route = min((t, r) for (r, c), t in v.items() if "fp8" in c)
        kvb = sizes[name]
        rows.append((kvb, name, b, f, b / f, kvb / 2 / (f * 1e-6) / 1e9 / stream, route))
    rows.sort()
    for kvb, name, b, f, sp, bw, route in rows:
        print(f"{name:22s} {kvb / 2**20:6.0f} MiB  16bit {b:7.1f}  fp8 {f:7.1f}  {sp:.2f}x  "
              f"bw {bw:.2f} {route}")
    for lo, hi in [(512, 1e12), (64, 512), (0, 64)]:
        sel = [r for r in rows if lo <= r[0] / 2**20 < hi]
        sp, bw = [r[4] for r in sel], [r[5] for r in sel]
        print(f"{lo}-{hi if hi < 1e12 else ''} MiB: n {len(sel)} speedup mean {sum(sp) / len(sp):.2f} "
              f"min {min(sp):.2f}; fraction of bandwidth mean {sum(bw) / len(bw):.2f} "
              f"min {min(bw):.2f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
