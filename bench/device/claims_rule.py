#!/usr/bin/env python3
"""claimswq's rule (bench/device/claimswq.sh): claims for workqueue plans, off vs on.

usage: claims_rule.py DIR   (DIR: sweep_{heldout,calibration}_claim_{false,true}.tsv)
Cells where claims engage: the graph-sized plan has more items than 2 x SMs (the grid). Adopt if
their graph_us geomean (on / off) <= 0.985 and none > 1.03x, and no other cell > 1.05x.
"""
import csv
import math
import sys


def load(path):
    return {(r["trace"], r["route"], r["sm_count"]): r
            for r in csv.DictReader(open(path), delimiter="\t")}


def main():
    d = sys.argv[1]
    engaged, other = [], []
    for grid in ("heldout", "calibration"):
        off = load(f"{d}/sweep_{grid}_claim_false.tsv")
        on = load(f"{d}/sweep_{grid}_claim_true.tsv")
        for k, a in off.items():
            if k[1] != "workqueue" or k not in on:
                continue
            r = float(on[k]["graph_us"]) / float(a["graph_us"])
            cell = (r, grid, k[0], int(k[2]), int(a["items"]))
            (engaged if int(a["items"]) > 2 * int(k[2]) else other).append(cell)
    gm = lambda cells: math.exp(sum(math.log(c[0]) for c in cells) / len(cells))
    for name, cells in (("engaged", engaged), ("other", other)):
        worst = max(cells)
        print(f"{name}: {len(cells)} cells, geomean {gm(cells):.3f}, worst {worst[0]:.3f} "
              f"({worst[2]}@{worst[3]} {worst[1]}), best {min(cells)[0]:.3f} ({min(cells)[2]}@{min(cells)[3]})")
    ok = gm(engaged) <= 0.985 and max(engaged)[0] <= 1.03 and max(other)[0] <= 1.05
    print(f"decision: {'adopt' if ok else 'reject'}")


if __name__ == "__main__":
    main()
