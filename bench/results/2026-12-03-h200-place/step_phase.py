#!/usr/bin/env python3
# Where a cached request's TTFT goes, from `pkv bench serve --dump_requests` files (gzipped):
# token arrivals per worker cluster into steps (tokens of one step arrive within 2 ms); for each
# timed request with < 256 uncached tokens: its send phase within the worker's step, how many step
# ends up to and including its first token's, and (for 2) the wait for the running step and the
# length of its own step. Usage: python3 step_phase.py prefix_1 load_1 single   (NAME.jsonl.gz)
import gzip, json, sys, bisect, collections
def pct(v,p):
    v=sorted(v); k=(len(v)-1)*p; f=int(k); c=min(f+1,len(v)-1); return v[f]+(v[c]-v[f])*(k-f)
for name in sys.argv[1:]:
    rs=[json.loads(l) for l in gzip.open(name+'.jsonl.gz')]
    by=collections.defaultdict(list)
    for r in rs:
        if r['status']!='OK': continue
        t=r['send_s']*1e3+r['ttft_ms']; ts=[t]
        for x in r['itl_ms']: t+=x; ts.append(t)
        by[r['worker']].extend(ts)
    cl={}
    for w,ts in by.items():
        ts.sort(); c=[]
        for t in ts:
            if c and t-c[-1][1]<=2.0: c[-1][1]=t
            else: c.append([t,t])
        cl[w]=c
    cnt=collections.Counter(); g0=[]; g1=[]; ph=[]
    for r in rs:
        if r['status']!='OK' or r['phase']!='timed': continue
        if r['prompt_tokens']-r['cached_tokens']>=256: continue
        c=cl[r['worker']]; starts=[x[0] for x in c]; s=r['send_s']*1e3; f=s+r['ttft_ms']
        jf=bisect.bisect_right(starts,f)-1          # cluster holding the first token
        i=bisect.bisect_right(starts,s)             # first cluster starting after the send
        if i==0 or jf<i: continue
        cnt[jf-i+1]+=1
        if jf-i+1==2: g0.append(c[i][0]-s); g1.append(c[jf][0]-c[i][0])
        ph.append((s-c[i-1][0])/(c[i][0]-c[i-1][0]))
    print(name,"step ends from send to first token (incl.):",sorted(cnt.items())[:5],
          "| send phase p50 %.2f | wait for the running step p50 %.1f ms, own step p50 %.1f ms"%(pct(ph,.5),pct(g0,.5),pct(g1,.5)))
