#!/usr/bin/env python3
"""cfg16's end-to-end rule (bench/device/cfg16.sh, fixed before its call) on the A/B's two runs.

usage: cfg16_rule.py AB1.tsv AB2.tsv
  AB*.tsv  `pkv-bench e2e --out` of cfg16.sh / call21.sh: variants fused+pdl+prenorm+w4+overlap
           and fused+pdl+prenorm+w8+overlap, 8B and 1B, bucketed-B1/B8-N4096, the two runs in
           opposite orders.
Rule: w8 becomes the default when (device tests pass, read separately) the 8B B=1 line is faster
under w8 in both runs and no line is > 0.5% slower under w8 in both runs; a 1B B=1 line slower in
both runs restricts w8 to head dim 128. Prints each line's w8/w4 ratio per run and the verdict.
"""
import csv
import sys


def steps(path):
    out = {}
    for r in csv.DictReader(open(path), delimiter="\t"):
        if r["kind"] != "decode" or not r["step_ms"]:
            continue
        form = "w8" if "+w8" in r["variant"] else "w4" if "+w4" in r["variant"] else None
        if form:
            out[(r["model"], r["name"], form)] = float(r["step_ms"])
    return out


def main(paths):
    runs = [steps(p) for p in paths]
    lines = sorted({(m, n) for run in runs for (m, n, _) in run})
    ratios = {}
    for m, n in lines:
        rs = [run[(m, n, "w8")] / run[(m, n, "w4")] for run in runs
              if (m, n, "w8") in run and (m, n, "w4") in run]
        ratios[(m, n)] = rs
        print(f"{m:12s} {n:22s} w8/w4 " + " ".join(f"{r:.4f}" for r in rs))
    if any(len(r) != len(runs) for r in ratios.values()) or not ratios:
        print("verdict: incomplete (a line is missing from a run)")
        return 1
    b1_8b = [r for (m, n), r in ratios.items() if m.startswith("llama3-8b") and "-B1-" in n]
    faster_8b = bool(b1_8b) and all(x < 1 for r in b1_8b for x in r)
    slower = [(m, n) for (m, n), r in ratios.items() if all(x > 1.005 for x in r)]
    b1_1b_slower = any(m.startswith("llama3-1b") and "-B1-" in n and all(x > 1 for x in r)
                       for (m, n), r in ratios.items())
    print(f"8B B=1 faster in every run: {faster_8b}; lines > 0.5% slower in every run: "
          f"{slower or 'none'}; 1B B=1 slower in every run: {b1_1b_slower}")
    ok = faster_8b and not slower
    scope = "head dim 128 only" if b1_1b_slower else "head dim <= 128"
    print(f"verdict: {'default on (' + scope + ')' if ok else 'stays off'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
