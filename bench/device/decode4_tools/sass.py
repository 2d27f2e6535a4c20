import csv, sys, collections
fn = sys.argv[1]; which = int(sys.argv[2]) if len(sys.argv) > 2 else 0
rows = []; k = -1
for r in csv.reader(open(fn)):
    if r and r[0] == "Kernel Name": k += 1; continue
    if r and r[0] == "Address": hdr = r; continue
    if k == which and r and r[0].startswith("0x"): rows.append(r)
ix = {h: i for i, h in enumerate(hdr)}
def num(r, h):
    v = r[ix[h]].replace(",", "")
    try: return float(v)
    except: return 0.0
tot_inst = sum(num(r, "Instructions Executed") for r in rows)
tot_s = sum(num(r, "Warp Stall Sampling (All Samples)") for r in rows)
print("instructions (SASS lines)", len(rows), "warp insts executed", tot_inst, "samples", tot_s)
stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
agg = {h: sum(num(r, h) for r in rows) for h in stalls}
for h, v in sorted(agg.items(), key=lambda x: -x[1]):
    if v: print(f"  {h:28s} {v:8.0f} {100*v/tot_s:5.1f}%")
base = int(rows[0][0], 16)
print("top instructions by samples:")
top = sorted(rows, key=lambda r: -num(r, "Warp Stall Sampling (All Samples)"))[:int(sys.argv[3]) if len(sys.argv) > 3 else 40]
for r in top:
    s = num(r, "Warp Stall Sampling (All Samples)")
    reasons = sorted(((num(r, h), h[6:]) for h in stalls if num(r, h)), reverse=True)[:3]
    print(f"  {int(r[0],16)-base:#7x} {s:6.0f} {100*s/tot_s:5.1f}% ex={num(r,'Instructions Executed'):6.0f} {r[1].strip()[:60]:60s} {reasons}")
