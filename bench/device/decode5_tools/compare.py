#!/usr/bin/env python3
"""Per-cell comparison of decode5's held-out passes: compare.py RESDIR [v1|v2]

RESDIR holds {base,v1,v2}_{h16,h8}_{1,2}.tsv (`pkv-bench kernels --out`, decode5.sh). For every
(cell, config, route) the time is the mean of the two passes' gpu_us; a cell's time under a
config is its best route. Prints, per kind (16-bit w4s3; FP8 w4s3, w8s3, auto): new / base per
cell (geomean, min, max, cells > 2% slower, by size), and the noise: base pass 1 / pass 2.
"""
import collections
import csv
import math
import sys


def load(path):
    out = {}
    for r in csv.DictReader(open(path), delimiter="\t"):
        t = float(r["gpu_us"])
        if t > 0:
            out[(r["trace"], r["variant"], r["route"])] = (t, float(r["kv_bytes"]))
    return out


def best(runs, route=None):
    """{(trace, variant): (time, kv bytes)} from the mean over passes, best route (or `route`)."""
    acc = collections.defaultdict(list)
    for run in runs:
        for k, v in run.items():
            acc[k].append(v)
    out = {}
    for (trace, var, rt), vs in acc.items():
        if route and rt != route:
            continue
        t = sum(v[0] for v in vs) / len(vs)
        key = (trace, var)
        if key not in out or t < out[key][0]:
            out[key] = (t, vs[0][1])
    return out


def config_of(variant):
    return variant.split("/")[0]


def report(title, base, new):
    by = collections.defaultdict(list)
    for key in sorted(set(base) & set(new), key=lambda k: base[k][1]):
        (tb, kvb), (tn, _) = base[key], new[key]
        by[config_of(key[1])].append((key[0], kvb / 2**20, tb, tn))
    for cfg, rows in sorted(by.items()):
        r = [tn / tb for _n, _m, tb, tn in rows]
        gm = math.exp(sum(math.log(x) for x in r) / len(r))
        print("%s %-6s cells %2d geomean %.3f min %.3f max %.3f" % (title, cfg, len(r), gm, min(r),
                                                                   max(r)))
        for lo, hi, name in ((0, 8, "< 8 MiB"), (8, 64, "8-64 MiB"), (64, 512, "64-512 MiB"),
                             (512, 1e9, ">= 512 MiB")):
            s = [(n, tb, tn) for n, m, tb, tn in rows if lo <= m < hi]
            if s:
                g = math.exp(sum(math.log(tn / tb) for _n, tb, tn in s) / len(s))
                print("    %-11s n %2d geomean %.3f  base max %.1f new max %.1f" % (
                    name, len(s), g, max(tb for _n, tb, _t in s), max(tn for _n, _b, tn in s)))
        slow = [(n, tb, tn) for n, _m, tb, tn in rows if tn > 1.02 * tb]
        print("    > 2%% slower: %s" % (", ".join("%s %.1f->%.1f" % x for x in slow) or "none"))


def main():
    d = sys.argv[1]
    vs = sys.argv[2:] or ["v1", "v2"]
    for kind in ("h16", "h8"):
        b1, b2 = load("%s/base_%s_1.tsv" % (d, kind)), load("%s/base_%s_2.tsv" % (d, kind))
        report("%s noise base2/base1" % kind, best([b1]), best([b2]))
        for v in vs:
            n = [load("%s/%s_%s_%d.tsv" % (d, v, kind, i)) for i in (1, 2)]
            report("%s %s/base" % (kind, v), best([b1, b2]), best(n))


if __name__ == "__main__":
    main()
