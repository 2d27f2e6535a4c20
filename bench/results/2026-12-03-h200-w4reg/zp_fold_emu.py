#!/usr/bin/env python3
# Emulates (pure Python, run: python3 zp_fold_emu.py) the fold's lane mappings with the PTX m16n8k16 fragment layout (exact integer values):
# StageXSums (both paths) + SumAt, the per-step MmaStepXSum + shuffles, and the fold identity.
import random
rng = random.Random(1)
def mma(Aregs, Bregs):  # Aregs[L] = 4 regs of 2 values, Bregs[L] = 2 regs of 2 -> C[L] = 4 values
    A = [[0]*16 for _ in range(16)]; B = [[0]*8 for _ in range(16)]
    for L in range(32):
        g, c = L >> 2, L & 3
        for r, (row, k0) in enumerate([(g, 2*c), (g+8, 2*c), (g, 2*c+8), (g+8, 2*c+8)]):
            A[row][k0:k0+2] = Aregs[L][r]
        for r, k0 in enumerate([2*c, 2*c+8]):
            B[k0][g], B[k0+1][g] = Bregs[L][r]
    D = [[sum(A[i][k]*B[k][j] for k in range(16)) for j in range(8)] for i in range(16)]
    return [[D[L>>2][2*(L&3)], D[L>>2][2*(L&3)+1], D[(L>>2)+8][2*(L&3)], D[(L>>2)+8][2*(L&3)+1]] for L in range(32)]
ones = [[(1, 1), (1, 1)] for _ in range(32)]
def regs_of(v): return [v[0:2], v[2:4], v[4:6], v[6:8]]
for T in range(1, 9):
    units, unit0 = 7, 3                          # odd unit count, span starting at unit 3
    x = [[rng.randint(-50, 50) for _ in range(units*128)] for _ in range(T)]
    vec = lambda t, e: x[t][8*e:8*e+8]          # staged vector e of token t
    truth = [[sum(x[t][128*u:128*u+128]) for u in range(units)] for t in range(T)]
    sums = [[None]*8 for _ in range(units)]
    for warp in range(8):
        if T <= 2:
            for t in range(T):
                for u in range(2*warp, units, 16):
                    regs = [regs_of(vec(t, (u + (L >> 4))*16 + (L & 15)) if u + (L >> 4) < units else [0]*8) for L in range(32)]
                    C = mma(regs, ones)
                    r = [C[L][0] + C[L][2] for L in range(32)]
                    r = [r[L] + r[L ^ 4] for L in range(32)]
                    r = [r[L] + r[L ^ 8] for L in range(32)]
                    for L in range(32):
                        j, uu = L & 15, u + (L >> 4)
                        if uu < units and j < 8 and (j == t or (t == T-1 and j > t)):
                            sums[uu][j] = r[L]
        else:
            for u in range(warp, units, 8):
                s = [[0]*4 for _ in range(32)]
                for q in range(4):
                    C = mma([regs_of(vec(min(L >> 2, T-1), u*16 + q*4 + (L & 3))) for L in range(32)], ones)
                    s = [[a + b for a, b in zip(s[L], C[L])] for L in range(32)]
                for L in range(32):
                    if L & 3 == 0: sums[u][L >> 2] = s[L][0] + s[L][2]
    want = [[truth[min(t, T-1)][u] for t in range(8)] for u in range(units)]
    assert sums == want, (T, sums, want)
    flat = [v for row in sums for v in row]
    for L in range(32):           # SumAt: sums + 2c - unit0 * 8, read at [U * 8], U absolute
        c = L & 3
        for U in range(unit0, unit0 + units):
            i = 2*c - unit0*8 + U*8
            assert flat[i:i+2] == [truth[min(2*c, T-1)][U-unit0], truth[min(2*c+1, T-1)][U-unit0]]
    u = 2                          # per-step path: 4 MMAs on the K-loop layout, shuffles 9c, 9c + 4
    us = [[0]*4 for _ in range(32)]
    for q in range(4):
        C = mma([regs_of(vec(min(L >> 2, T-1), u*16 + q*4 + (L & 3))) for L in range(32)], ones)
        us = [[a + b for a, b in zip(us[L], C[L])] for L in range(32)]
    sg = [us[L][0] + us[L][2] for L in range(32)]
    for L in range(32):
        c = L & 3
        assert sg[9*c] == truth[min(2*c, T-1)][u] and sg[9*c+4] == truth[min(2*c+1, T-1)][u]
q = [rng.randint(0, 15) for _ in range(128)]; xx = [rng.randint(-9, 9) for _ in range(128)]
for m, z in ((128, 5), (1024, 8)):
    assert sum((a - z)*b for a, b in zip(q, xx)) == sum((m + a)*b for a, b in zip(q, xx)) - (m + z)*sum(xx)
print("emulation ok: StageXSums (T=1..8), SumAt, per-step sums + shuffles, fold identity")
