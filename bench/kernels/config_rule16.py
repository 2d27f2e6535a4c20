#!/usr/bin/env python3
"""16-bit pages: w4s3 vs an 8-warp config per cell; fit a batch threshold, score it on another grid.

usage: config_rule16.py fit CALIBRATION.tsv          (prints the rule: W8 config and B)
       config_rule16.py score HELDOUT.tsv W8 B
  *.tsv  `pkv-bench kernels --dtype bf16 --configs w4s3,w8s2,w8s3 --out` (bench/device/call20.sh)
Rule: the 8-warp config W8 (w8s2 or w8s3) when batch <= B, else w4s3. A cell's time under a
config is its best route's graph_us (the worker replays CUDA graphs); regret = the chosen
config's time over the best config's. `fit` searches W8 x B in {0 (never), 1, 2, 4, ..., 256}
for the lowest geometric-mean regret (ties: the smaller B). Decision rule, fixed before the
sweep (bench/NOTES.md, twentieth session): the fitted rule is adopted if on the held-out grid
its geomean regret is at least 0.5% below always-w4s3's and no cell is more than 1.03x slower
than under w4s3.
"""
import collections
import csv
import math
import sys

CONFIGS = ("w4s3", "w8s2", "w8s3")


def cells(path):
    t = collections.defaultdict(dict)
    feat = {}
    for r in csv.DictReader(open(path), delimiter="\t"):
        cfg = r["variant"]
        if cfg not in CONFIGS:
            continue
        g = float(r["graph_us"]) if float(r["graph_us"]) > 0 else float(r["gpu_us"])
        t[r["trace"]][cfg] = min(g, t[r["trace"]].get(cfg, 1e30))
        feat[r["trace"]] = int(r["f_batch"])
    return {n: (feat[n], v) for n, v in t.items() if all(c in v for c in CONFIGS)}


def choose(batch, w8, b):
    return w8 if batch <= b else "w4s3"


def score(data, w8, b):
    logs, worst, slower, n8 = [], (1.0, ""), (1.0, ""), 0
    for name, (batch, v) in data.items():
        cfg = choose(batch, w8, b)
        n8 += cfg != "w4s3"
        reg = v[cfg] / min(v.values())
        logs.append(math.log(reg))
        worst = max(worst, (reg, name))
        slower = max(slower, (v[cfg] / v["w4s3"], name))
    return math.exp(sum(logs) / len(logs)), worst, slower, n8


def main():
    mode, path = sys.argv[1], sys.argv[2]
    data = cells(path)
    if mode == "fit":
        best = None
        for w8 in ("w8s2", "w8s3"):
            for b in [0] + [2**k for k in range(9)]:
                g, worst, slower, n8 = score(data, w8, b)
                key = (round(g, 6), b)
                if best is None or key < best[0]:
                    best = (key, w8, b, g, worst, slower, n8)
        _, w8, b, g, worst, slower, n8 = best
        print(f"fit on {len(data)} cells: {w8} when B <= {b}: geomean regret {g:.4f}, worst "
              f"{worst[0]:.3f} ({worst[1]}), max vs w4s3 {slower[0]:.3f} ({slower[1]}), {w8} on {n8}")
        g4, w4, _, _ = score(data, "w8s2", 0)
        print(f"always w4s3: geomean regret {g4:.4f}, worst {w4[0]:.3f} ({w4[1]})")
        return
    w8, b = sys.argv[3], int(sys.argv[4])
    for name, (batch, v) in sorted(data.items()):
        cfg = choose(batch, w8, b)
        print(f"{name:22s} B {batch:4d}  " + "  ".join(f"{c} {v[c]:8.1f}" for c in CONFIGS) +
              f"  rule {cfg}  regret {v[cfg] / min(v.values()):.3f}  vs w4s3 {v[cfg] / v['w4s3']:.3f}")
    g, worst, slower, n8 = score(data, w8, b)
    g4, w4, _, _ = score(data, w8, 0)
    print(f"rule ({w8} when B <= {b}): geomean regret {g:.4f}, worst {worst[0]:.3f} ({worst[1]}), "
          f"max vs w4s3 {slower[0]:.3f} ({slower[1]}), {w8} on {n8}")
    print(f"always w4s3: geomean regret {g4:.4f}, worst {w4[0]:.3f} ({w4[1]})")
    ok = g <= 0.995 * g4 and slower[0] <= 1.03
    print(f"decision: {'adopt' if ok else 'reject'} (needs geomean <= 0.995 x always-w4s3's and "
          f"no cell > 1.03x w4s3)")


if __name__ == "__main__":
    main()
