#!/usr/bin/env python3
"""Step 1 of the unseen2 rule (bench/traces/README.md): the workqueue route's GPU time with the
balanced layout against the wave model's, per cell, from bench/device/policy17.sh's sweeps.

Usage: wq_balance.py RESULTS_DIR   (RESULTS_DIR/balanced/sweep_X.tsv, RESULTS_DIR/waves/wq_sweep_X.tsv)
Prints per grid and SM count the geomean ratio (balanced / waves), the worst and best cells, the
largest output difference against the fused route, then the verdict: balanced kept only if the
geomean over every rule cell is <= 0.99 and no cell exceeds 1.05.
"""
import csv
import math
import os
import sys

GRIDS = ("sweep_calibration.tsv", "sweep_heldout.tsv", "sweep_third.tsv")
GEOMEAN_BAR, CELL_BAR = 0.99, 1.05


def workqueue_rows(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            if r["route"] == "workqueue":
                rows[(r["trace"], int(r["sm_count"]))] = r
    return rows


# Reported, not part of the rule: FP8 pages (both layouts swept with every route).
INFO = (("sweep_calibration_fp8.tsv", "sweep_calibration_fp8.tsv"),)


def main():
    root = sys.argv[1]
    all_ratios, worst, diffs = [], (0.0, ""), []
    for grid, waves_file in [(g, "wq_" + g) for g in GRIDS] + list(INFO):
        if not os.path.exists(os.path.join(root, "balanced", grid)):
            continue
        bal = workqueue_rows(os.path.join(root, "balanced", grid))
        wav = workqueue_rows(os.path.join(root, "waves", waves_file))
        for sms in sorted({k[1] for k in bal}, reverse=True):
            cells = sorted(k for k in bal if k[1] == sms and k in wav)
            ratios = [(float(bal[k]["gpu_us"]) / float(wav[k]["gpu_us"]), k[0]) for k in cells]
            gm = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
            lo, hi = min(ratios), max(ratios)
            print(f"{grid:22s} {sms:3d} SMs {len(ratios):2d} cells: geomean {gm:.3f}, "
                  f"best {lo[0]:.3f} ({lo[1]}), worst {hi[0]:.3f} ({hi[1]})")
            for r, name in sorted(ratios):
                k = (name, sms)
                print(f"    {name:22s} {float(wav[k]['gpu_us']):9.2f} -> {float(bal[k]['gpu_us']):9.2f} us"
                      f" ({r:.3f})  items {wav[k]['items']} -> {bal[k]['items']}"
                      f"  plan_us {wav[k]['plan_us']} -> {bal[k]['plan_us']}")
            diffs += [float(bal[k]["max_diff_vs_fused"]) for k in cells]
            if grid in GRIDS:
                all_ratios += [r for r, _ in ratios]
                worst = max(worst, (hi[0], f"{hi[1]}@{sms} {grid}"))
    gm = math.exp(sum(math.log(r) for r in all_ratios) / len(all_ratios))
    print(f"all {len(all_ratios)} cells: geomean {gm:.3f} (bar {GEOMEAN_BAR}), worst {worst[0]:.3f} "
          f"{worst[1]} (bar {CELL_BAR}); largest |out - fused| with balanced {max(diffs):.3g}")
    keep = gm <= GEOMEAN_BAR and worst[0] <= CELL_BAR
    print("verdict: " + ("balanced kept (step 2 fits on balanced/)" if keep else
                         "wave model kept (step 2 fits on waves/)"))


if __name__ == "__main__":
    main()
