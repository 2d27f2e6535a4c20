#!/usr/bin/env python3
"""Tables of an A/B(/C) device call's results, read on this machine after the call.

    bench/device/compare.py DIR [--base BIN]

DIR is a call's `r/` folder (or the folder holding it) as the scripts of bench/device/ write it:
  tests/NAME.rc                    one "rc=... NAME [ PASSED ] ..." line each
  [gN/]gemv_BIN_INPUT.tsv          `pkv-bench gemv` of binary BIN, input rmsnorm|plain, round N
  e2e_TAG.tsv                      `pkv-bench e2e`, TAG = BIN_ROUND (or any tag: a column each)
Prints the device tests' status, then per GEMV cell the chain time (us) of every binary (one
value per round) with its mean ratio to --base (default pkv-bench-base), then per e2e line and
variant the step time (ms) of every tag with the ratio of each binary's mean to the base's.
Only the standard library: run it with the python3 of the build machine.
"""
import argparse
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict


def read_tsv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def fmt_ratio(x):
    return f"{x:.3f}" if x is not None else "-"


def tests(root):
    rcs = sorted(glob.glob(os.path.join(root, "tests", "*.rc")))
    if not rcs:
        return
    print("## device tests")
    for p in rcs:
        with open(p) as f:
            print("  " + f.read().strip())
    print()


def gemv(root, base):
    # (input, shape, tokens, format) -> bin -> [chain_us per round]
    cells = defaultdict(lambda: defaultdict(list))
    bins = []
    files = sorted(glob.glob(os.path.join(root, "gemv_*.tsv")) +
                   glob.glob(os.path.join(root, "g*", "gemv_*.tsv")))
    for p in files:
        m = re.match(r"gemv_(.+)_(rmsnorm|plain)\.tsv$", os.path.basename(p))
        if not m:
            continue
        b, inp = m.group(1), m.group(2)
        if b not in bins:
            bins.append(b)
        for row in read_tsv(p):
            key = (inp, row["shape"], int(row["tokens"]), row["format"])
            cells[key][b].append(float(row["chain_us"]))
    if not cells:
        return
    print(f"## gemv chain us (values per round; ratio = mean / mean of {base})")
    order = [b for b in bins if b != base] + ([base] if base in bins else [])
    print("input   shape       T format  " + "  ".join(f"{b:>22}" for b in order) + "  ratios")
    for key in sorted(cells):
        inp, shape, t, fmt = key
        row = cells[key]
        vals = "  ".join(f"{' '.join(f'{v:.2f}' for v in row.get(b, [])):>22}" for b in order)
        ref = statistics.mean(row[base]) if row.get(base) else None
        ratios = " ".join(
            f"{b}:{fmt_ratio(statistics.mean(row[b]) / ref if ref else None)}"
            for b in order if b != base and row.get(b))
        print(f"{inp:7} {shape:11} {t} {fmt:6}  {vals}  {ratios}")
    print()


def e2e(root, base):
    # (model, line, variant) -> tag -> step_ms
    cells = defaultdict(dict)
    tags = []
    for p in sorted(glob.glob(os.path.join(root, "e2e_*.tsv"))):
        tag = os.path.basename(p)[len("e2e_"):-len(".tsv")]
        tags.append(tag)
        for row in read_tsv(p):
            if row.get("kind") in ("ceiling", None) or not row.get("step_ms"):
                continue
            cells[(row["model"], row["name"], row["variant"])][tag] = float(row["step_ms"])
    if not cells:
        return
    binary = {t: re.sub(r"_\d+$", "", t) for t in tags}
    print(f"## e2e step ms (ratio = mean of a binary's rounds / mean of {base}'s)")
    print("model               line                    variant        " +
          " ".join(f"{t:>18}" for t in tags) + "  ratios")
    for key in sorted(cells):
        row = cells[key]
        by_bin = defaultdict(list)
        for t, v in row.items():
            by_bin[binary[t]].append(v)
        ref = statistics.mean(by_bin[base]) if by_bin.get(base) else None
        ratios = " ".join(f"{b}:{fmt_ratio(statistics.mean(v) / ref if ref else None)}"
                          for b, v in sorted(by_bin.items()) if b != base)
        vals = " ".join(f"{row[t]:>18.3f}" if t in row else f"{'-':>18}" for t in tags)
        print(f"{key[0]:19} {key[1]:23} {key[2]:14} {vals}  {ratios}")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--base", default="pkv-bench-base")
    a = ap.parse_args()
    root = a.dir
    if os.path.isdir(os.path.join(root, "r")):
        root = os.path.join(root, "r")
    if not os.path.isdir(root):
        sys.exit(f"compare.py: {a.dir} is not a folder")
    tests(root)
    gemv(root, a.base)
    e2e(root, a.base)


if __name__ == "__main__":
    main()
