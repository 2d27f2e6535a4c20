#!/usr/bin/env python3
"""Issue 14's route-policy bar on an unseen grid, by the rule fixed before the grid was measured.

bench/traces/README.md ("unseen-20261204.tsv"): fit only on a calibration sweep, two candidate fits
(`pkv-bench calibrate` defaults; the defaults with v3's length-shape inputs as candidates), chosen
between by the policy-v2 rule (the variant only if `--cv`'s nested leave-one-out and
leave-one-kind-out geomean regrets both improve at 132 and 66 SMs with no worse worst cell), then
score the chosen fit once on the unseen sweep; the bar is the learned policy's worst-cell regret
<= 1.05 at 132 and 66 SMs. This script runs those steps in that order and prints each one's
evidence, so nothing is chosen by hand after the grid's results exist.

Usage (build machine, no GPU needed):
  bench/policy/score_unseen.py --bench build/bin/pkv-bench --sweeps DIR [--out OUT]
    DIR: sweep_calibration.tsv and sweep_unseen.tsv (bench/device/policy15.sh's results).
  --unseen_sweep / --unseen_trace score another grid (e.g. run 3's held-out sweep, to check the
  tool against the figures of record: learned worst 1.058 at 132 SMs, 1.298 at 66).
"""
import argparse
import os
import re
import subprocess
import sys

V3_CANDIDATES = ("log_bytes_per_slot_sq,log_wq_imbalance,fill,len_cv,mean_over_max,log2_batch,"
                 "log_pair_mib,log_fused_imbalance,long_frac,long_token_frac")
RULE_SMS = (132, 66)
BAR = 1.05

SECTION = re.compile(r"^## (\d+) SMs")
CV = re.compile(r"cv (nested leave-one-out|leave-one-kind-out)\s+\(\d+ folds\): geomean regret "
                r"([0-9.]+), worst ([0-9.]+)")
LEARNED = re.compile(r"^learned\s+(\d+) SMs, \d+ cells: worst regret ([0-9.]+) \(([^)]+)\), "
                     r"geomean regret ([0-9.]+)")


def run(cmd, log):
    print("$ " + " ".join(cmd), flush=True)
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        sys.exit(f"failed (rc={rc}); see {log}")
    with open(log) as f:
        return f.read()


def parse_cv(text):
    """{sms: {"nested": (geomean, worst), "kind": (geomean, worst)}} from calibrate --cv output."""
    out, sms = {}, None
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            sms = int(m.group(1))
            out[sms] = {}
            continue
        m = CV.search(line)
        if m and sms is not None:
            key = "nested" if m.group(1).startswith("nested") else "kind"
            out[sms][key] = (float(m.group(2)), float(m.group(3)))
    return out


def variant_wins(base, v3):
    """The policy-v2 rule: both schemes' geomeans improve at 132 and 66 SMs, no worst cell worse."""
    for sms in RULE_SMS:
        for scheme in ("nested", "kind"):
            b, v = base[sms][scheme], v3[sms][scheme]
            if not (v[0] < b[0] and v[1] <= b[1]):
                return False, f"{sms} SMs {scheme}: v3 {v[0]:.4f}/{v[1]:.3f} vs defaults {b[0]:.4f}/{b[1]:.3f}"
    return True, "v3 improves both schemes at 132 and 66 SMs"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", required=True, help="pkv-bench binary")
    ap.add_argument("--sweeps", required=True, help="folder of sweep_calibration.tsv, sweep_unseen.tsv")
    ap.add_argument("--calibration_trace", default="bench/traces/calibration-20260622.tsv")
    ap.add_argument("--unseen_sweep", default=None, help="default: SWEEPS/sweep_unseen.tsv")
    ap.add_argument("--unseen_trace", default="bench/traces/unseen-20261204.tsv")
    ap.add_argument("--out", default="/tmp/score_unseen", help="fits, logs and the scored table")
    a = ap.parse_args()
    calibration = os.path.join(a.sweeps, "sweep_calibration.tsv")
    unseen = a.unseen_sweep or os.path.join(a.sweeps, "sweep_unseen.tsv")
    for f in (calibration, unseen, a.calibration_trace, a.unseen_trace):
        if not os.path.exists(f):
            sys.exit(f"missing {f}")

    fits = {}
    for name, extra in (("defaults", []), ("v3", [f"--candidates={V3_CANDIDATES}"])):
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        text = run([a.bench, "calibrate", f"--measurements={calibration}",
                    f"--traces={a.calibration_trace}", f"--out_dir={d}", "--cv=true"] + extra,
                   os.path.join(a.out, f"calibrate_{name}.txt"))
        fits[name] = parse_cv(text)
        for sms in RULE_SMS:
            if sms not in fits[name] or len(fits[name][sms]) != 2:
                sys.exit(f"no cv lines for {sms} SMs in the {name} fit (calibration sweep at {sms} SMs?)")
            cv = fits[name][sms]
            print(f"  {name:8s} {sms:3d} SMs: nested {cv['nested'][0]:.4f} / {cv['nested'][1]:.3f}, "
                  f"kind-out {cv['kind'][0]:.4f} / {cv['kind'][1]:.3f}")
    wins, why = variant_wins(fits["defaults"], fits["v3"])
    chosen = "v3" if wins else "defaults"
    print(f"chosen before scoring: {chosen} ({why})")

    table = os.path.join(a.out, "unseen.md")
    run([a.bench, "policy", f"--measurements={unseen}", f"--traces={a.unseen_trace}",
         f"--policy_dir={os.path.join(a.out, chosen)}", "--cells=0", f"--out={table}"],
        os.path.join(a.out, "policy.txt"))
    worst = {}
    with open(table) as f:
        for line in f:
            m = LEARNED.match(line)
            if m:
                worst[int(m.group(1))] = (float(m.group(2)), m.group(3), float(m.group(4)))
    ok = True
    for sms in RULE_SMS:
        if sms not in worst:
            sys.exit(f"no learned line at {sms} SMs in {table}")
        w, cell, geo = worst[sms]
        met = w <= BAR
        ok &= met
        print(f"unseen {sms:3d} SMs: learned worst regret {w:.3f} ({cell}), geomean {geo:.3f}: "
              f"{'meets' if met else 'misses'} the bar {BAR}")
    print(f"bar {'met' if ok else 'not met'} at 132 and 66 SMs; table {table}")


if __name__ == "__main__":
    main()
