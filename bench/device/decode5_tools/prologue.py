#!/usr/bin/env python3
"""A one-tile item's prologue (rows' page ids and addresses, the K/V copies) in static SASS:
    prologue.py SOURCE CUBIN [--timeline TL]
The prologue's code lies between the first instruction of the stage loop (`for (int s = 0; s <
stages`) and the wait after it (`CpAsyncWaitDynamic(stages)`); inside it the copy loop is
compiled three times (one per L2 prefetch hint, one runs), so the estimate of the instructions a
warp executes counts the copy code (device_util.cuh cp.async lines and the issue lambda's lines)
at 1/3. With --timeline (base only) prints decode4's measured count of the same range."""
import sys

import sass_lines as s


def main():
    src, cubin = sys.argv[1], sys.argv[2]
    lines = open(src).read().split("\n")
    lo = next(i + 1 for i, l in enumerate(lines) if "for (int s = 0; s < stages; ++s)" in l)
    hi = next(i + 1 for i, l in enumerate(lines) if "CpAsyncWaitDynamic(stages);" in l)
    is_lo = next(i + 1 for i, l in enumerate(lines) if "auto issue_hinted" in l)
    is_hi = next(i + 1 for i, l in enumerate(lines) if "auto issue = [&]" in l)
    _n, ops = s.kernel(cubin, "AttentionKernelILi128E6__half")
    a0 = min(i for i, (_a, _o, (f, ln)) in enumerate(ops) if f == "decode_attention.cuh" and ln == lo)
    a1 = min(i for i, (_a, _o, (f, ln)) in enumerate(ops)
             if i > a0 and f == "decode_attention.cuh" and hi <= ln <= hi + 12)
    est, copy, other = 0.0, 0, 0
    for _a, o, (f, ln) in ops[a0:a1]:
        c = f == "device_util.cuh" or (f == "decode_attention.cuh" and is_lo <= ln <= is_hi)
        copy += c
        other += not c
    print("prologue range: %d instructions, copy code %d (x1/3), other %d; estimate %.0f" %
          (a1 - a0, copy, other, other + copy / 3))
    if "--timeline" in sys.argv:
        ex = s.dynamic(ops, s.read_timeline(sys.argv[sys.argv.index("--timeline") + 1]))
        print("measured (decode4 run1): %.0f executed a warp" % sum(ex[a0:a1]))


if __name__ == "__main__":
    main()
