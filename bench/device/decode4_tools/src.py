import csv, sys
fn = sys.argv[1]; which = int(sys.argv[2]); topn = int(sys.argv[3])
k = -1; f = None; out = []; seen_first = None
for r in csv.reader(open(fn)):
    if not r: continue
    if r[0] == "File Path":
        if seen_first is None: seen_first = r[1]
        if r[1] == seen_first and f is not None and "cuda_fp16" in r[1]: k += 1
        elif f is None: k = 0
        f = r[1].split("/")[-1]; continue
    if r[0] in ("Function Name", "Line No"):
        if r[0] == "Line No": hdr = r
        continue
    if k == which and r[0] and r[0] != "":
        ix = {h: i for i, h in enumerate(hdr)}
        def n(h):
            try: return float(r[ix[h]].replace(",", ""))
            except: return 0.0
        out.append((f, int(r[0]), r[1].strip()[:70], n("Warp Stall Sampling (All Samples)"), n("Instructions Executed")))
ts = sum(o[3] for o in out); ti = sum(o[4] for o in out)
print("samples", ts, "warp insts", ti)
by_file = {}
for o in out: by_file.setdefault(o[0], [0, 0]); by_file[o[0]][0] += o[3]; by_file[o[0]][1] += o[4]
for fl, (s, i) in sorted(by_file.items(), key=lambda x: -x[1][1]): print(f"  {fl:28s} samples {s:5.0f} insts {i:7.0f}")
print("top lines by instructions executed:")
for o in sorted(out, key=lambda o: -o[4])[:topn]: print(f"  {o[0][:22]:22s}:{o[1]:4d} ex={o[4]:6.0f} s={o[3]:4.0f}  {o[2]}")
print("top lines by samples:")
for o in sorted(out, key=lambda o: -o[3])[:topn]: print(f"  {o[0][:22]:22s}:{o[1]:4d} ex={o[4]:6.0f} s={o[3]:4.0f}  {o[2]}")
