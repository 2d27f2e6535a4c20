import csv, sys
cfn, sfn, which = sys.argv[1], sys.argv[2], int(sys.argv[3])
# address -> (file:line) from the cuda,sass export (first kernel block only)
amap = {}; f = None; line = None; blocks = 0; first = None
for r in csv.reader(open(cfn)):
    if not r: continue
    if r[0] == "File Path":
        if first is None: first = r[1]
        elif r[1] == first: blocks += 1
        f = r[1].split("/")[-1]; continue
    if blocks != which: continue
    if r[0] not in ("", "Function Name", "Line No"): line = f"{f}:{r[0]}"
    elif r[0] == "" and len(r) > 2 and r[2].startswith("0x"): amap[int(r[2], 16)] = line
rows = []; k = -1
for r in csv.reader(open(sfn)):
    if r and r[0] == "Kernel Name": k += 1; continue
    if r and r[0] == "Address": hdr = r; continue
    if k == which and r and r[0].startswith("0x"): rows.append(r)
ix = {h: i for i, h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
def n(r, h):
    try: return float(r[ix[h]].replace(",", ""))
    except: return 0.0
base = int(rows[0][0], 16); tot = sum(n(r, "Warp Stall Sampling (All Samples)") for r in rows)
cum = 0; chunk = None; acc = 0; ex = 0; reasons = {}
def flush():
    global acc, ex, reasons
    if chunk and (acc or ex):
        rs = ",".join(f"{k[6:]}:{v:.0f}" for k, v in sorted(reasons.items(), key=lambda x: -x[1])[:3])
        print(f"{chunk[0]:#7x} {chunk[1]:28s} ex={ex:6.0f} s={acc:4.0f} cum={100*cum/tot:5.1f}% {rs}")
    acc = 0; ex = 0; reasons = {}
for r in rows:
    a = int(r[0], 16); ln = amap.get(a, "?")
    if chunk is None or ln != chunk[1]: flush(); chunk = (a - base, ln)
    s = n(r, "Warp Stall Sampling (All Samples)"); cum += s; acc += s; ex += n(r, "Instructions Executed")
    for h in stalls:
        v = n(r, h)
        if v: reasons[h] = reasons.get(h, 0) + v
flush()
