#!/usr/bin/env python3
"""Step 1 of the unseen4 rule (bench/traces/README.md): do quota chunks become the default?

Reads DIR/base and DIR/quota (bench/device/policy19.sh): sweep_calibration.tsv and
sweep_heldout.tsv, workqueue rows. A cell's plan changed when its item count differs. Passes when
no changed cell's graph_us with quota chunks is more than 1.03x the one without, their geomean is
at most 0.97x, and no unchanged cell (same plan: the noise band) is more than 1.05x. Prints the
changed cells and the noise band's extremes, then `keep: quota` or `keep: base`.
"""
import csv
import math
import sys

MAX_CHANGED = 1.03
MAX_GEOMEAN = 0.97
MAX_UNCHANGED = 1.05


def load(path):
    cells = {}
    for r in csv.DictReader(open(path), delimiter="\t"):
        if r["route"] != "workqueue" or float(r["graph_us"]) <= 0:
            continue
        key = (r["trace"], r["batch"], r["sum_len"], r["max_len"], r["sm_count"])
        cells[key] = (float(r["graph_us"]), int(r["items"]))
    return cells


def main(root):
    changed, same = [], []
    for grid in ("calibration", "heldout"):
        base = load(f"{root}/base/sweep_{grid}.tsv")
        quota = load(f"{root}/quota/sweep_{grid}.tsv")
        for key, (us, items) in base.items():
            if key not in quota:
                continue
            q_us, q_items = quota[key]
            cell = (q_us / us, f"{grid} {key[0]}@{key[4]}", us, q_us, items, q_items)
            (changed if q_items != items else same).append(cell)
    for c in sorted(changed):
        print(f"  changed {c[0]:.3f} {c[1]} {c[2]:.1f} -> {c[3]:.1f} us, items {c[4]} -> {c[5]}")
    for c in sorted(same)[:3] + sorted(same)[-3:]:
        print(f"  same    {c[0]:.3f} {c[1]} {c[2]:.1f} -> {c[3]:.1f} us")
    geomean = math.exp(sum(math.log(c[0]) for c in changed) / len(changed)) if changed else 1.0
    worst_changed = max((c[0] for c in changed), default=1.0)
    worst_same = max((c[0] for c in same), default=1.0)
    print(f"{len(changed)} changed cells: worst {worst_changed:.3f} (bar {MAX_CHANGED}), geomean "
          f"{geomean:.4f} (bar {MAX_GEOMEAN}); {len(same)} unchanged: worst {worst_same:.3f} "
          f"(bar {MAX_UNCHANGED})")
    ok = (changed and worst_changed <= MAX_CHANGED and geomean <= MAX_GEOMEAN
          and worst_same <= MAX_UNCHANGED)
    print("keep: quota" if ok else "keep: base")


if __name__ == "__main__":
    main(sys.argv[1])
