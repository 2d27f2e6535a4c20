#!/usr/bin/env python3
"""Static SASS of the decode-attention kernel by source line and opcode, without cuobjdump.

    sass_lines.py CUBIN KERNEL_SUBSTR [--timeline NCU_TIMELINE] [--regions]

CUBIN: nvcc ... -lineinfo -cubin (decode5_tools/cubins.sh). Each .text.<kernel> section is the
kernel's code, 16 bytes an instruction; the opcode is the low 12 bits of the first 64-bit word
(named below; checked against cuobjdump -sass of the same kernel on the GPU machine, decode5
call 1: every instruction of main's and v1's <128, half> kernel agrees). The .debug_line section (DWARF 2 line program, one
sequence per kernel) gives every instruction's file:line.

--timeline: decode4's ncu timeline of the same code (bench/results/2026-12-03-h200-decode4/run1/
ncu_tiny_timeline.txt: runs of instructions of one source line with their executed count summed
over the kernel's 32 warps), giving each instruction's executions a warp: the dynamic instruction
mix of the one-tile item by opcode and region.
"""
import collections
import re
import struct
import sys

# Low 12 bits of the first word -> name (reg / imm / const operand variants share the low 9 bits).
NAMES9 = {
    0x002: "MOV", 0x005: "CS2R", 0x007: "SEL", 0x008: "FSEL", 0x009: "FMNMX", 0x00B: "FSETP",
    0x00C: "ISETP", 0x010: "IADD3", 0x011: "LEA", 0x012: "LOP3", 0x013: "IABS", 0x016: "PRMT",
    0x017: "IMNMX", 0x019: "SHF", 0x01C: "PLOP3", 0x036: "VIADD", 0x046: "VIADDMNMX", 0x0CA: "R2UR", 0x020: "FMUL", 0x021: "FADD", 0x023: "FFMA",
    0x024: "IMAD", 0x025: "IMAD.WIDE", 0x027: "IMAD.HI", 0x03A: "MOVM", 0x03B: "LDSM",
    0x03C: "HMMA", 0x03E: "F2FP", 0x048: "VIMNMX", 0x082: "UMOV", 0x086: "VOTEU", 0x08C: "UISETP",
    0x090: "UIADD3", 0x091: "ULEA", 0x092: "ULOP3", 0x099: "USHF", 0x0A4: "UIMAD",
    0x0A5: "UIMAD.WIDE", 0x0B9: "ULDC", 0x087: "USEL", 0x0C3: "S2UR", 0x0C2: "R2UR", 0x100: "FLO",
    0x104: "I2F", 0x105: "F2I", 0x106: "I2F", 0x108: "MUFU", 0x118: "NOP", 0x119: "S2R",
    0x11A: "DEPBAR", 0x11D: "BAR", 0x141: "BSYNC", 0x145: "BSSY", 0x147: "BRA", 0x148: "WARPSYNC",
    0x14D: "EXIT", 0x150: "RET", 0x143: "CALL", 0x144: "CALL", 0x181: "LDG", 0x182: "LDC",
    0x184: "LDS", 0x186: "STG", 0x188: "STS", 0x189: "SHFL", 0x18E: "RED", 0x192: "MEMBAR",
    0x1A8: "ATOMG", 0x1AE: "LDGSTS", 0x1AF: "LDGDEPBAR", 0x1C2: "R2UR", 0x1C3: "S2UR",
    0x183: "LDL", 0x187: "STL", 0x18A: "ATOM", 0x1B6: "ELECT", 0x18F: "CCTL", 0x1AB: "ERRBAR", 0x180: "LD", 0x11B: "ENDCOLLECTIVE",
    0x142: "BREAK", 0x149: "BRX", 0x146: "YIELD",
}
CLASS = {
    "int": {"IADD3", "LEA", "LOP3", "SHF", "IMAD", "IMAD.WIDE", "IMAD.HI", "ISETP", "SEL",
            "IMNMX", "VIMNMX", "PRMT", "IABS", "PLOP3", "FLO", "MOV", "CS2R", "VIADD",
            "VIADDMNMX"},
    "uniform": {"UMOV", "UISETP", "UIADD3", "ULEA", "ULOP3", "USHF", "UIMAD", "UIMAD.WIDE",
                "USEL", "S2UR", "R2UR", "VOTEU", "ULDC"},
    "const": {"LDC"},
    "fp": {"FMUL", "FADD", "FFMA", "FMNMX", "FSETP", "FSEL", "MUFU", "F2FP", "I2F", "F2I"},
    "mma": {"HMMA", "LDSM", "MOVM"},
    "mem": {"LD", "LDG", "STG", "LDS", "STS", "LDGSTS", "LDGDEPBAR", "DEPBAR", "ATOMG", "RED", "ATOM",
            "MEMBAR", "SHFL", "LDL", "STL", "CCTL", "ERRBAR"},
    "ctrl": {"BRA", "BAR", "BSSY", "BSYNC", "EXIT", "WARPSYNC", "NOP", "S2R", "CALL", "RET",
             "ELECT", "BREAK", "BRX", "YIELD", "ENDCOLLECTIVE"},
}


def opname(word):
    return NAMES9.get(word & 0x1FF, "op%03x" % (word & 0x1FF))


def opclass(name):
    for c, s in CLASS.items():
        if name in s:
            return c
    return "other"


def sections(path):
    d = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    stro = secs[shstrndx][4]
    out = []
    for s in secs:
        n = d[stro + s[0]:d.index(b"\0", stro + s[0])].decode()
        out.append((n, s, d[s[4]:s[4] + s[5]]))
    symtab = next(s for s in out if s[0] == ".symtab")
    syms = [struct.unpack_from("<IBBHQQ", symtab[2], i) for i in range(0, len(symtab[2]), 24)]
    return out, syms


def uleb(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            return r, i


def sleb(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            if x & 0x40:
                r -= 1 << s
            return r, i


def line_table(secs, syms):
    """{text section name: {address: (file, line)}} from .debug_line (DWARF 2/3)."""
    by = {n: (s, b) for n, s, b in secs}
    b = by[".debug_line"][1]
    # set_address operands are relocated against a section symbol: offset -> section index.
    reloc = {}
    if ".rela.debug_line" in by:
        rb = by[".rela.debug_line"][1]
        for i in range(0, len(rb), 24):
            off, info, _add = struct.unpack_from("<QQq", rb, i)
            reloc[off] = syms[info >> 32][3]
    names = [n for n, _s, _b in secs]
    out = collections.defaultdict(dict)
    pos = 0
    while pos < len(b):
        unit_len, = struct.unpack_from("<I", b, pos)
        end = pos + 4 + unit_len
        _ver, hlen = struct.unpack_from("<HI", b, pos + 4)
        p = pos + 10
        min_inst, _def_stmt, line_base, line_range, opcode_base = struct.unpack_from("<BBbBB", b, p)
        p += 5
        std_len = list(b[p:p + opcode_base - 1])
        p += opcode_base - 1
        dirs = [""]
        while b[p]:
            e = b.index(b"\0", p)
            dirs.append(b[p:e].decode())
            p = e + 1
        p += 1
        files = [""]
        while b[p]:
            e = b.index(b"\0", p)
            files.append(b[p:e].decode().split("/")[-1])
            p = e + 1
            _, p = uleb(b, p)
            _, p = uleb(b, p)
            _, p = uleb(b, p)
        p = pos + 10 + hlen
        addr, fil, line, sec = 0, 1, 1, None

        def emit():
            if sec is not None:
                out[names[sec]][addr] = (files[fil] if fil < len(files) else "?", line)

        while p < end:
            op = b[p]
            p += 1
            if op >= opcode_base:
                adj = op - opcode_base
                addr += (adj // line_range) * min_inst
                line += line_base + adj % line_range
                emit()
            elif op == 0:
                ln, p = uleb(b, p)
                sub = b[p]
                if sub == 1:
                    addr, fil, line = 0, 1, 1
                elif sub == 2:
                    sec = reloc.get(p + 1)
                    addr, = struct.unpack_from("<Q", b, p + 1)
                p += ln
            elif op == 1:
                emit()
            elif op == 2:
                v, p = uleb(b, p)
                addr += v * min_inst
            elif op == 3:
                v, p = sleb(b, p)
                line += v
            elif op == 4:
                fil, p = uleb(b, p)
            elif op in (5,):
                _, p = uleb(b, p)
            elif op in (6, 7, 10, 11):
                pass
            elif op == 8:
                addr += ((255 - opcode_base) // line_range) * min_inst
            elif op == 9:
                v, = struct.unpack_from("<H", b, p)
                p += 2
                addr += v
            else:
                for _ in range(std_len[op - 1]):
                    _, p = uleb(b, p)
        pos = end
    return out


def kernel(path, substr):
    secs, syms = sections(path)
    lt = line_table(secs, syms)
    name = next(n for n, _s, _b in secs if n.startswith(".text.") and substr in n)
    code = next(b for n, _s, b in secs if n == name)
    lines = lt.get(name, {})
    ops, at = [], ("?", 0)
    for a in range(0, len(code), 16):
        at = lines.get(a, at)
        ops.append((a, opname(struct.unpack_from("<Q", code, a)[0]), at))
    return name, ops


def read_timeline(path):
    runs = []
    for ln in open(path):
        m = re.match(r"\s*(0x[0-9a-f]+)\s+(\S+):(\d+)\s+ex=\s*(\d+)", ln)
        if m:
            runs.append((int(m.group(1), 16), m.group(2), int(m.group(3)), int(m.group(4))))
    return runs


def dynamic(ops, runs, warps=32):
    """Executions a warp of each instruction: a run's count spread over the instructions from its
    start that share its source line."""
    byaddr = {a: i for i, (a, _o, _l) in enumerate(ops)}
    ex = [0.0] * len(ops)
    for a, f, line, n in runs:
        i = byaddr.get(a)
        if i is None or n == 0:
            continue
        j = i
        while j < len(ops) and ops[j][2] == (f, line):
            j += 1
        j = max(j, i + 1)
        for k in range(i, j):
            ex[k] = n / warps / (j - i)
    return ex


# Regions of ProcessItem / the kernel in source order (decode_attention.cuh line ranges of main
# c82fc59; --regions prints counts by these).
def region(f, line, regions):
    for name, (rf, lo, hi) in regions.items():
        if f == rf and lo <= line <= hi:
            return name
    return f


def main():
    args = sys.argv[1:]
    path, sub = args[0], args[1]
    name, ops = kernel(path, sub)
    hist = collections.Counter(o for _a, o, _l in ops)
    print("%s: %d instructions" % (name[6:], len(ops)))
    print("  static by class: " + "  ".join(
        "%s %d" % (c, n) for c, n in sorted(collections.Counter(
            opclass(o) for _a, o, _l in ops).items(), key=lambda x: -x[1])))
    print("  static by opcode: " + "  ".join("%s %d" % kv for kv in hist.most_common(40)))
    if "--timeline" in args:
        runs = read_timeline(args[args.index("--timeline") + 1])
        ex = dynamic(ops, runs)
        tot = sum(ex)
        print("  dynamic a warp (timeline): %.0f" % tot)
        byop, byline, bycl = collections.Counter(), collections.Counter(), collections.Counter()
        for (a, o, l), e in zip(ops, ex):
            byop[o] += e
            byline[l] += e
            bycl[opclass(o)] += e
        print("  dynamic by class: " + "  ".join("%s %.0f" % kv for kv in bycl.most_common()))
        print("  dynamic by opcode: " + "  ".join("%s %.0f" % kv for kv in byop.most_common(30)))
        print("  dynamic by line:")
        for (f, l), e in sorted(byline.items(), key=lambda x: -x[1])[:45]:
            print("    %-24s %4d %6.1f" % (f, l, e))
    if "--lines" in args:
        byline = collections.defaultdict(collections.Counter)
        for a, o, l in ops:
            byline[l][o] += 1
        for l in sorted(byline):
            c = byline[l]
            print("    %-24s %4d %4d  %s" % (l[0], l[1], sum(c.values()), " ".join(
                "%s:%d" % kv for kv in c.most_common(8))))
    if "--dump" in args:
        for a, o, l in ops:
            print("%6x %-10s %s:%d" % (a, o, l[0], l[1]))


if __name__ == "__main__":
    main()
