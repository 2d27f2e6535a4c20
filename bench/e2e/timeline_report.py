#!/usr/bin/env python3
"""Reads one step's per-CTA timeline (pkv-bench e2e --timeline_dir; bench/e2e/e2e_timeline.h) and
prints where the step's time goes kernel by kernel.

A kernel instance is the set of CTA records with one grid id. For each, ordered by when its first
CTA's PDL wait returned (go):
  span    next instance's first go - this one's first go: the instance's share of the chain
  resident  first go - first wait: how long its first CTA sat resident before the release (PDL)
  go_sprd last go - first go: CTAs released late (not resident when the previous grid completed)
  tail    last exit - median exit (kernels that mark exits): the grid's imbalance
  release next first go - this last exit: a boundary's completion-to-release latency
The step's last kernel (the LM head) has no span; its first go to last exit is printed instead.
Then the same columns averaged over the repeating layer pattern (instances with the same
(grid, threads) signature at the same position of each layer), which is where a per-layer fixed
cost shows.

usage: timeline_report.py FILE.tsv [--layer_kernels N]
"""
import argparse
import collections
import csv
import statistics


def load(path):
    inst = collections.defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            inst[r["grid_id"]].append(r)
    out = []
    for gid, rows in inst.items():
        go = sorted(int(r["t_go_ns"]) for r in rows)
        wait = sorted(int(r["t_wait_ns"]) for r in rows)
        exits = sorted(int(r["t_exit_ns"]) for r in rows if int(r["t_exit_ns"]) >= 0)
        out.append({
            "gid": gid, "grid": int(rows[0]["grid"]), "threads": int(rows[0]["threads"]),
            "ctas": len(rows), "first_wait": wait[0], "first_go": go[0], "last_go": go[-1],
            "med_exit": statistics.median(exits) if exits else None,
            "last_exit": exits[-1] if exits else None,
        })
    out.sort(key=lambda x: x["first_go"])
    for a, b in zip(out, out[1:]):
        a["span"] = b["first_go"] - a["first_go"]
        a["release"] = b["first_go"] - a["last_exit"] if a["last_exit"] is not None else None
    return out


def us(ns):
    return "-" if ns is None else f"{ns / 1000:7.2f}"


def layer_period(out):
    """The smallest period p such that signatures repeat with period p over most instances."""
    sig = [(x["grid"], x["threads"]) for x in out]
    for p in range(2, 16):
        same = sum(1 for i in range(len(sig) - p) if sig[i] == sig[i + p])
        if len(sig) > 3 * p and same >= 0.8 * (len(sig) - p):
            return p
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--layer_kernels", type=int, default=0, help="kernels a layer (0: detect)")
    ap.add_argument("--all", action="store_true", help="print every instance")
    args = ap.parse_args()
    out = load(args.file)
    if not out:
        print("no records")
        return
    step = out[-1]["first_go"] - out[0]["first_go"]
    print(f"{args.file}: {len(out)} kernel instances, first go to last go {step / 1000:.1f} us")
    cols = "  #  grid thr ctas    span resident go_sprd    tail release"
    if args.all:
        print(cols)
        for i, x in enumerate(out):
            tail = x["last_exit"] - x["med_exit"] if x["last_exit"] is not None else None
            print(f"{i:3d} {x['grid']:5d} {x['threads']:3d} {x['ctas']:4d} {us(x.get('span'))} "
                  f"{us(x['first_go'] - x['first_wait'])} {us(x['last_go'] - x['first_go'])} "
                  f"{us(tail)} {us(x.get('release'))}")
    p = args.layer_kernels or layer_period(out)
    if not p:
        print("no repeating layer pattern found (pass --layer_kernels)")
        return
    # Align on the most common signature run: start at the first index whose next p signatures
    # recur p later.
    sig = [(x["grid"], x["threads"]) for x in out]
    start = next(i for i in range(len(sig) - 2 * p) if sig[i:i + p] == sig[i + p:i + 2 * p])
    layers = (len(out) - start - 1) // p  # the last instance has no span
    print(f"layer pattern: {p} kernels, {layers} whole layers from instance {start}; means a layer:")
    print("pos  grid thr    span resident go_sprd    tail release")
    total = 0.0
    for k in range(p):
        xs = [out[start + l * p + k] for l in range(layers)]

        def mean(fn):
            vals = [v for v in map(fn, xs) if v is not None]
            return statistics.mean(vals) if vals else None

        span = mean(lambda x: x.get("span"))
        total += span or 0
        resident = mean(lambda x: x["first_go"] - x["first_wait"])
        sprd = mean(lambda x: x["last_go"] - x["first_go"])
        tail = mean(lambda x: x["last_exit"] - x["med_exit"] if x["last_exit"] is not None else None)
        release = mean(lambda x: x.get("release"))
        print(f"{k:3d} {xs[0]['grid']:5d} {xs[0]['threads']:3d} {us(span)} {us(resident)} "
              f"{us(sprd)} {us(tail)} {us(release)}")
    print(f"layer total {total / 1000:.2f} us; head/tail of the step outside the layers: "
          f"{(step - total * layers) / 1000:.1f} us")
    last = out[-1]  # the LM head: no next kernel, so its time is go to last exit
    if last["last_exit"] is not None:
        print(f"last kernel (grid {last['grid']}): first go to last exit "
              f"{(last['last_exit'] - last['first_go']) / 1000:.1f} us")


if __name__ == "__main__":
    main()
