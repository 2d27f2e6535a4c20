#!/usr/bin/env python3
"""FP8 w4s3 vs w8s3 per cell: fit decode::ChooseKernelConfig's rule, score it on another grid.

usage: config_rule.py fit CALIBRATION.tsv
       config_rule.py score HELDOUT.tsv B CV
  *.tsv  `pkv-bench kernels --kv_dtype fp8_e4m3 --configs w4s3,w8s3 --out` (routes as measured)
Rule: w4s3 when batch >= B and the length CV >= CV, else w8s3. A cell's time under a config is
its best route's; regret = the chosen config's time over the better config's. `fit` searches
B in {1, 2, 4, ..., 256} x CV in {0, 0.1, ..., 3.0} for the lowest geometric-mean regret (ties:
the fewest w4s3 cells, then the largest B and CV) and prints the always-w8s3 baseline beside it.
"""
import collections
import csv
import math
import sys


def cells(path):
    t = collections.defaultdict(dict)
    feat = {}
    for r in csv.DictReader(open(path), delimiter="\t"):
        if "fp8" not in r["variant"]:
            continue
        cfg = r["variant"].split("/")[0]
        g = float(r["gpu_us"])
        t[r["trace"]][cfg] = min(g, t[r["trace"]].get(cfg, 1e30))
        feat[r["trace"]] = (int(r["f_batch"]), float(r["f_len_cv"]))
    return {n: (feat[n], v) for n, v in t.items() if "w4s3" in v and "w8s3" in v}


def choose(batch, cv, b, c):
    return "w4s3" if batch >= b and cv >= c else "w8s3"


def score(data, b, c):
    logs, worst, n4 = [], (1.0, ""), 0
    for name, ((batch, cv), v) in data.items():
        cfg = choose(batch, cv, b, c)
        n4 += cfg == "w4s3"
        reg = v[cfg] / min(v.values())
        logs.append(math.log(reg))
        worst = max(worst, (reg, name))
    return math.exp(sum(logs) / len(logs)), worst, n4


def main():
    mode, path = sys.argv[1], sys.argv[2]
    data = cells(path)
    if mode == "fit":
        best = None
        for b in [2**k for k in range(9)]:
            for ci in range(31):
                c = ci / 10
                g, worst, n4 = score(data, b, c)
                key = (round(g, 6), n4, -b, -c)
                if best is None or key < best[0]:
                    best = (key, b, c, g, worst, n4)
        _, b, c, g, worst, n4 = best
        print(f"fit on {len(data)} cells: B >= {b}, CV >= {c:.1f}: geomean regret {g:.4f}, "
              f"worst {worst[0]:.3f} ({worst[1]}), w4s3 on {n4} cells")
        g8, w8, _ = score(data, 1 << 30, 0)
        print(f"always w8s3: geomean regret {g8:.4f}, worst {w8[0]:.3f} ({w8[1]})")
        return
    b, c = int(sys.argv[3]), float(sys.argv[4])
    for name, ((batch, cv), v) in sorted(data.items()):
        cfg = choose(batch, cv, b, c)
        print(f"{name:22s} B {batch:4d} cv {cv:5.2f}  w4s3 {v['w4s3']:8.1f}  w8s3 {v['w8s3']:8.1f}"
              f"  rule {cfg}  regret {v[cfg] / min(v.values()):.3f}")
    for label, (bb, cc) in (("rule", (b, c)), ("always w8s3", (1 << 30, 0))):
        g, worst, n4 = score(data, bb, cc)
        print(f"{label}: geomean regret {g:.4f}, worst {worst[0]:.3f} ({worst[1]}), w4s3 on {n4}")


if __name__ == "__main__":
    main()
