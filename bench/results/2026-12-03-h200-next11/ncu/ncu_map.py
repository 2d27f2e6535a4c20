import csv, sys, gzip, collections, re
f = sys.argv[1]
lines = [l for l in gzip.open(f, 'rt') if l.startswith('"')]
rows = list(csv.reader(lines))
h = rows[0]; units = rows[1]; data = rows[2:]
ix = {k: i for i, k in enumerate(h)}
ks = []
for r in data:
    name = r[ix['Kernel Name']]
    t = float(r[ix['gpu__time_duration.sum']].replace(',',''))
    u = units[ix['gpu__time_duration.sum']]
    t_us = t / 1000 if u == 'nsecond' or u == 'ns' else (t if u in ('usecond','us') else t*1e3)
    b = float(r[ix['dram__bytes_read.sum']].replace(',','')); bu = units[ix['dram__bytes_read.sum']]
    mult = {'byte':1,'Kbyte':1e3,'Mbyte':1e6,'Gbyte':1e9}.get(bu,1)
    ks.append((name, t_us, b*mult, r[ix['launch__grid_size']]))
# split into the two runs by 'DecodeAttention' sequences: find kernels per step: print compressed names
def short(n):
    n = re.sub(r'\(.*', '', n)
    n = re.sub(r'<.*', '', n)
    return n.split('::')[-1]
# find last occurrence region: the final step of the second model = last ~ (kernels per step)
names = [short(k[0]) for k in ks]
print(len(ks), collections.Counter(names).most_common(20))
def short2(n):
    n = n.replace('(anonymous namespace)::', '')
    n = re.sub(r'\(.*', '', n); n = re.sub(r'<.*', '', n)
    return n.split('::')[-1]
names = [short2(k[0]) for k in ks]
att = [i for i, n in enumerate(names) if n == 'DecodeAttentionKernel']
start = att[-32] - 1  # the qkv GEMV before layer 0's attention
# back up to include embed etc: find previous kernel that is not Gemv
while start > 0 and names[start - 1] != 'DecodeAttentionKernel' and not names[start-1].startswith('Sample'): start -= 1
step = ks[start:]
print('step kernels', len(step), 'total us %.1f' % sum(k[1] for k in step), 'bytes GB %.3f' % (sum(k[2] for k in step)/1e9))
# classify GEMVs within each layer by position: layer = qkv, attn, o, gateup, down
agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
seq = [(short2(k[0]), k) for k in step]
role_cycle = ['qkv', 'attn', 'o', 'gateup', 'down']
li = 0
layer_kernels = []
i = 0
# find first qkv: first Gemv before first attention
first_att = [j for j, (n, _) in enumerate(seq) if n == 'DecodeAttentionKernel'][0]
for j, (n, k) in enumerate(seq):
    if j < first_att - 1: role = 'pre:' + n
    else:
        r = (j - (first_att - 1))
        if r < 32 * 5: role = role_cycle[r % 5]
        else: role = 'post:' + n
    a = agg[role]; a[0] += 1; a[1] += k[1]; a[2] += k[2]
for role, (c, t, b) in sorted(agg.items(), key=lambda x: -x[1][1]):
    print(f"{role:28s} n={c:3d} total {t:8.1f} us  per {t/c:7.2f} us  {b/c/1e6:8.2f} MB each  {b/t/1e3 if t else 0:7.0f} GB/s")
