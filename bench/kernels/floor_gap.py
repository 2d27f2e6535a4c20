#!/usr/bin/env python3
"""Issue 14's kernel-cell figure: each line's best GPU time minus its byte floor, before/after.

usage: floor_gap.py BASE.tsv NEW.tsv [--col gpu_us|graph_us]
  BASE.tsv, NEW.tsv  `pkv-bench kernels --out` of the same grid (16-bit rows are used)
The byte floor is KV bytes / the run's own streaming-read bandwidth. Prints per line the floor,
both best times (over the routes measured) and both gaps, then the issue-14 buckets: cells of
64-500 MiB (bar: gap <= 6 us) and cells under 8 MiB (bar: time <= 8 us), and "no cell slower".
"""
import collections
import csv
import sys


def best(path, col):
    out = {}
    for r in csv.DictReader(open(path), delimiter="\t"):
        if "fp8" in r["variant"]:
            continue
        t = float(r[col])
        if t <= 0:
            continue
        kvb = float(r["kv_bytes"])
        floor = kvb / (float(r["stream_gbps"]) * 1e9) * 1e6
        name = r["trace"]
        if name not in out or t < out[name][1]:
            out[name] = (kvb, t, floor, r["route"])
    return out


def main(base_path, new_path, col):
    base, new = best(base_path, col), best(new_path, col)
    rows = sorted((new[n][0], n) for n in new if n in base)
    buckets = collections.defaultdict(list)
    print(f"{'line':22s} {'MiB':>6s} {'floor':>7s} {'base':>7s} {'new':>7s} "
          f"{'gap base':>8s} {'gap new':>8s}  route")
    for kvb, n in rows:
        _, tb, fb, _ = base[n]
        _, tn, fn, route = new[n]
        mib = kvb / 2**20
        print(f"{n:22s} {mib:6.0f} {fn:7.1f} {tb:7.1f} {tn:7.1f} {tb - fb:8.1f} {tn - fn:8.1f}  {route}")
        key = "64-500 MiB" if 64 <= mib <= 500 else "< 8 MiB" if mib < 8 else "other"
        buckets[key].append((tb - fb, tn - fn, tb, tn, n))
    for key in ("< 8 MiB", "64-500 MiB", "other"):
        v = buckets[key]
        if not v:
            continue
        gb = sorted(x[0] for x in v)
        gn = sorted(x[1] for x in v)
        print(f"{key}: n {len(v)}  gap base median {gb[len(gb) // 2]:.1f} max {gb[-1]:.1f}  "
              f"gap new median {gn[len(gn) // 2]:.1f} max {gn[-1]:.1f}  "
              f"time base max {max(x[2] for x in v):.1f} new max {max(x[3] for x in v):.1f}")
    slower = [(n, tb, tn) for _, n in rows for tb, tn in [(base[n][1], new[n][1])] if tn > tb * 1.02]
    print("cells > 2% slower than base:", ", ".join(f"{n} {tb:.1f}->{tn:.1f}" for n, tb, tn in slower)
          or "none")


if __name__ == "__main__":
    col = "gpu_us"
    args = [a for a in sys.argv[1:] if not a.startswith("--col")]
    for a in sys.argv[1:]:
        if a.startswith("--col="):
            col = a.split("=", 1)[1]
    main(args[0], args[1], col)
