#!/usr/bin/env python3
"""Static SASS counts of the 4-bit GEMV kernels without cuobjdump (not installed on the build box).

    zp_fold_sass.py BASE.cubin BASE.ptxas NEW.cubin NEW.ptxas

Cubins and ptxas logs come from (repeat per tree, dtype and arch):
    nvcc -DPKV_HAVE_CUDA=1 -I$TREE -O2 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a \
      --expt-relaxed-constexpr -std=c++17 -Xptxas -v -cubin -o X.cubin \
      -x cu kernels/model/gemv_int4_bf16.cu 2> X.ptxas

Method: each .text.<kernel> section of the cubin is the kernel's code, 16 bytes an instruction
(sm_70+). Opcodes are read from the low 9 bits of the instruction's first 64-bit word and named by
calibration against the PTX (HMMA = 0x03c: 64 per kernel = 8 unrolled units x 8 mma.sync;
HADD2 = 0x030: 256 = 8 units x 32 bf16 subtractions; 0x012 LOP3, 0x019 SHF, 0x027 IMAD.HI,
0x024 IMAD, 0x184 LDS, 0x023 FFMA, 0x189 SHFL, 0x147 branch). Basic blocks end at a branch; the
K loop's units sit in blocks with HMMAs: the last four such blocks are the tail units (one unit
each, predicated), the two before them the full batch (four units, two halves). Per-unit numbers
are instructions of those blocks divided by the units they hold.
"""
import collections
import re
import struct
import sys

NAMES = {0x012: "LOP3", 0x019: "SHF", 0x027: "IMAD.HI", 0x030: "HADD2", 0x031: "HFMA2",
         0x03c: "HMMA", 0x184: "LDS", 0x024: "IMAD", 0x023: "FFMA", 0x021: "FADD",
         0x016: "PRMT", 0x189: "SHFL", 0x147: "BRA"}


def text_sections(path):
    d = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    secs = [struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize) for i in range(shnum)]
    stro = secs[shstrndx][4]
    out = {}
    for name, _typ, _flags, _addr, off, size in secs:
        n = d[stro + name:d.index(b"\0", stro + name)].decode()
        if n.startswith(".text."):
            out[n[6:]] = d[off:off + size]
    return out


def short(kernel):
    m = re.search(r"GemvInputE(\d)ELNS0_12GemvEpilogueE(\d)ELb(\d)", kernel)
    i, e, st = (int(v) for v in m.groups())
    return "%s %s %s" % (["plain", "rms"][i], ["store", "resid", "ropekv", "silumul"][e],
                         ["per-step x", "staged x"][st])


def blocks(code):
    out, blk = [], collections.Counter()
    for i in range(0, len(code), 16):
        op = struct.unpack_from("<Q", code, i)[0] & 0x1FF
        blk[op] += 1
        if op == 0x147 or i + 16 == len(code):
            out.append(blk)
            blk = collections.Counter()
    return out


def ptxas(path):
    r = {}
    for e in re.split(r"ptxas info\s+: Compiling entry function", open(path).read())[1:]:
        name = re.search(r"'([^']+)'", e).group(1)
        regs = int(re.search(r"Used (\d+) registers", e).group(1))
        sp = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", e)
        r[name] = (regs, int(sp.group(1)), int(sp.group(2)))
    return r


def stats(cubin, log):
    regs = ptxas(log)
    res = {}
    for k, code in text_sections(cubin).items():
        hm = [b for b in blocks(code) if b[0x03C] > 0]
        full, tail = hm[-6:-4], hm[-4:]
        mix = sum(tail, collections.Counter())
        res[short(k)] = (len(code) // 16, sum(sum(b.values()) for b in full) / 4,
                         sum(sum(b.values()) for b in tail) / 4, regs.get(k, (0, 0, 0)),
                         {NAMES.get(o, "%03x" % o): n / 4 for o, n in mix.items()})
    return res


def main():
    base, new = stats(sys.argv[1], sys.argv[2]), stats(sys.argv[3], sys.argv[4])
    print("| kernel | static SASS | per unit, full batch | per unit, tail | registers | spill st/ld |")
    print("|---|---|---|---|---|---|")
    for k in base:
        b, n = base[k], new[k]
        print("| %s | %d -> %d | %.1f -> %.1f | %.1f -> %.1f | %d -> %d | %d/%d -> %d/%d |" %
              (k, b[0], n[0], b[1], n[1], b[2], n[2], b[3][0], n[3][0], b[3][1], b[3][2],
               n[3][1], n[3][2]))
    k = next(k for k in base if k.endswith("staged x"))
    for tag, r in (("base", base[k]), ("new", new[k])):
        print("%s, one tail unit of '%s': %s" % (tag, k, "  ".join(
            "%s %.0f" % (o, n) for o, n in sorted(r[4].items(), key=lambda x: -x[1]) if n >= 1)))


if __name__ == "__main__":
    main()
