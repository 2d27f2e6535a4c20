#!/usr/bin/env python3
"""Summarise a `pkv-bench kernels` TSV of the held-out grid against issue 3's goals.

usage: summarize.py HELDOUT.tsv [--routes fused,split,workqueue,persistent]

Prints a markdown table per cell (KV MB, byte floor = KV bytes / streaming-read bandwidth of the
same run, every route's GPU time, the best of the engine's routes, its fraction of the bandwidth,
FlashInfer's best time and the speed-up) and the goal checks. "Best" picks among the routes an
adaptive policy may choose (default: fused, split, workqueue, persistent; the ablation
bucketed-exact and the two-kernel merge variants are shown but not chosen).
"""
import csv
import math
import sys


def main():
    path = sys.argv[1]
    routes = ["fused", "split", "workqueue", "persistent"]
    if "--routes" in sys.argv:
        routes = sys.argv[sys.argv.index("--routes") + 1].split(",")
    rows = list(csv.DictReader(open(path), delimiter="\t"))
    rows = [r for r in rows if r.get("sm_count", "132") in ("132", "")] or rows
    order, cells = [], {}
    for r in rows:
        key = r["route"] + ("/2k" if r["variant"].endswith("/2k") else "")
        if r["trace"] not in cells:
            order.append(r["trace"])
            cells[r["trace"]] = {}
        cells[r["trace"]][key] = r
    shown = ["fused", "split", "workqueue", "persistent", "bucketed-exact", "split/2k",
             "workqueue/2k"]
    print("| cell | KV MB | floor us | " + " | ".join(shown) +
          " | best | us | frac bw | FI us | vs FI |")
    print("|" + "---|" * (len(shown) + 8))
    speedups, big_misses, small, worse = [], [], [], []
    for t in order:
        c = cells[t]
        any_row = next(iter(c.values()))
        kv = float(any_row["kv_bytes"])
        bw = float(any_row["stream_gbps"]) * 1e9
        floor_us = kv / bw * 1e6
        best = min((k for k in routes if k in c), key=lambda k: float(c[k]["gpu_us"]))
        us = float(c[best]["gpu_us"])
        frac = float(c[best]["frac_bw"])
        fi = float(any_row["fi_us"])
        times = " | ".join(f"{float(c[k]['gpu_us']):.1f}" if k in c else "-" for k in shown)
        sp = fi / us if fi > 0 else 0
        print(f"| {t} | {kv / 1e6:.1f} | {floor_us:.1f} | {times} | {best} | {us:.1f} | "
              f"{frac:.3f} | {fi:.1f} | {sp:.3f} |")
        if fi > 0:
            speedups.append(sp)
            if sp < 1:
                worse.append(f"{t} ({sp:.3f})")
        if kv >= 64 * 2**20 and frac < 0.9:
            big_misses.append(f"{t} ({frac:.3f})")
        if kv < 8 * 2**20:
            small.append(f"{t} ({us:.1f} us)")
    if speedups:
        gm = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        print(f"\ngeometric-mean speed-up vs FlashInfer: {gm:.3f} over {len(speedups)} cells")
        print(f"cells slower than FlashInfer: {', '.join(worse) or 'none'}")
    print(f">= 64 MiB cells under 90% of the streaming bandwidth: {', '.join(big_misses) or 'none'}")
    print(f"< 8 MiB cells: {', '.join(small)}")


if __name__ == "__main__":
    main()
