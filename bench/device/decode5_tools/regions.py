#!/usr/bin/env python3
"""Instructions of the decode-attention kernel by region of decode_attention.cuh.

    regions.py SOURCE CUBIN [--timeline NCU_TIMELINE] [--kernel SUBSTR]

SOURCE: the decode_attention.cuh the cubin was compiled from (regions are found by marker lines,
so they survive edits). Static counts always; with --timeline (decode4's ncu run of the same
code, one-tile cell tiny-B1-N16, <128, half>, w4s3) also the dynamic instructions a warp.
Instructions of inlined helpers (device_util.cuh, fast_divmod.h, ...) count to the region of the
last decode_attention.cuh line before them in code order; warp_state.cuh's to AttendTile.
"""
import collections
import sys

import sass_lines as s

MARKERS = [  # (region, marker alternatives); a region runs to the next marker's line
    ("merge ticket / empty item", ["__device__ void TicketAndMerge"]),
    ("AttendTile (MMAs, softmax)", ["void AttendTile("]),
    ("combine and output write", ["void CombineAndWrite("]),
    ("ProcessItem setup", ["// Runs item `item_index`"]),
    ("item + prefix load, live count", ["// Round trip 1"]),
    ("first page, npro, Q + page-id copies", ["const uint32_t first_page"]),
    ("K/V row address math + issue, prologue", ["const uint8_t* kc = static_cast",
                                                "const int ld_row0 = tid / kChunks"]),
    ("Q fragments, scales, state init", ["// Q has landed once"]),
    ("tile loop: waits, ring, next rows", ["for (int i = 0; i < ntiles; ++i)"]),
    ("combine and output write", ["__syncthreads();  // the ring is drained and every warp"]),
    ("kernel start / item loop", ["// Non-persistent launches"]),
]
ORDER = ["kernel start / item loop", "ProcessItem setup", "item + prefix load, live count",
         "first page, npro, Q + page-id copies", "K/V row address math + issue, prologue",
         "Q fragments, scales, state init", "tile loop: waits, ring, next rows",
         "AttendTile (MMAs, softmax)", "combine and output write", "merge ticket / empty item",
         "other"]


def bounds(source):
    src = open(source).read().split("\n")
    out = []
    for name, alts in MARKERS:
        line = next(i + 1 for i, l in enumerate(src) if any(a in l for a in alts))
        out.append((line, name))
    return sorted(out)


def region_of(line, bs):
    r = "other"
    for lo, name in bs:
        if line >= lo:
            r = name
    return r


def count(source, cubin, sub, timeline=None):
    bs = bounds(source)
    _n, ops = s.kernel(cubin, sub)
    ex = s.dynamic(ops, s.read_timeline(timeline)) if timeline else [0.0] * len(ops)
    cur = 0
    st, dy = collections.Counter(), collections.Counter()
    mix = collections.defaultdict(collections.Counter)
    for (_a, o, (f, line)), e in zip(ops, ex):
        if f == "decode_attention.cuh":
            cur = line
        elif f == "warp_state.cuh":
            cur = next(lo for lo, n in bs if n.startswith("AttendTile"))
        r = region_of(cur, bs)
        st[r] += 1
        dy[r] += e
        mix[r][o] += 1
    return st, dy, mix


def main():
    a = sys.argv[1:]
    sub = a[a.index("--kernel") + 1] if "--kernel" in a else "AttentionKernelILi128E6__half"
    tl = a[a.index("--timeline") + 1] if "--timeline" in a else None
    st, dy, mix = count(a[0], a[1], sub, tl)
    print("%s: static %d%s" % (sub, sum(st.values()),
                               ", dynamic a warp %.0f" % sum(dy.values()) if tl else ""))
    for r in ORDER:
        if st[r]:
            print("  %-42s static %5d%s  %s" % (r, st[r], "  dyn %5.0f" % dy[r] if tl else "",
                                               " ".join("%s:%d" % kv for kv in mix[r].most_common(7))))


if __name__ == "__main__":
    main()
