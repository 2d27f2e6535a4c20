#!/usr/bin/env python3
"""Issue 16's kernel table from two `pkv-bench kernels --out` files of the same grid and call.

usage: fp8_issue16.py BIT16.tsv FP8.tsv CONFIG
  BIT16.tsv  16-bit rows (best route per line is the 16-bit time)
  FP8.tsv    fp8_e4m3 rows; CONFIG picks which: a label prefix such as w8s3 or auto (the worker's
             per-step choice), or "best" (the faster of every config: an oracle, for reference)
Speedup = best 16-bit route / best FP8 route of CONFIG per line; sizes in 16-bit bytes; the
bandwidth fraction counts FP8 bytes against the FP8 file's own streaming-read measurement.
Buckets as issue 16: >= 512 MiB (bar: each >= 1.8x and >= 0.85), 64-512 MiB (each >= 1.4x),
< 64 MiB (none slower).
"""
import collections
import csv
import sys


def best(path, keep):
    out, stream = {}, 0.0
    for r in csv.DictReader(open(path), delimiter="\t"):
        if not keep(r["variant"]):
            continue
        t = float(r["gpu_us"])
        stream = float(r["stream_gbps"])
        if r["trace"] not in out or t < out[r["trace"]][0]:
            out[r["trace"]] = (t, float(r["kv_bytes"]), r["route"], r["variant"])
    return out, stream


def main(p16, p8, cfg):
    b16, _ = best(p16, lambda v: "fp8" not in v)
    keep = (lambda v: "fp8" in v) if cfg == "best" else (lambda v: "fp8" in v and v.startswith(cfg))
    b8, stream = best(p8, keep)
    rows = sorted((b16[n][1], n) for n in b8 if n in b16)
    buckets = collections.defaultdict(list)
    for kvb16, n in rows:
        t16, t8 = b16[n][0], b8[n][0]
        sp = t16 / t8
        bw = b8[n][1] / (t8 * 1e-6) / (stream * 1e9)
        mib = kvb16 / 2**20
        print(f"{n:22s} {mib:6.0f} MiB  16bit {t16:7.1f}  fp8 {t8:7.1f}  {sp:.2f}x  bw {bw:.2f}  "
              f"{b8[n][3]} {b8[n][2]}")
        key = ">= 512 MiB" if mib >= 511.5 else "64-512 MiB" if mib >= 63.5 else "< 64 MiB"
        buckets[key].append((sp, bw, n))
    for key in (">= 512 MiB", "64-512 MiB", "< 64 MiB"):
        v = buckets[key]
        sps = [x[0] for x in v]
        bws = [x[1] for x in v]
        extra = ""
        if key == ">= 512 MiB":
            extra = (f"; >= 1.8x: {sum(s >= 1.8 for s in sps)} of {len(v)}, >= 0.85 bw: "
                     f"{sum(b >= 0.85 for b in bws)}, both: "
                     f"{sum(s >= 1.8 and b >= 0.85 for s, b, _ in v)}")
        print(f"{key}: n {len(v)} speedup mean {sum(sps) / len(v):.2f} min {min(sps):.2f} "
              f"({min(v)[2]}); bw mean {sum(bws) / len(v):.2f} min {min(bws):.2f}{extra}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
