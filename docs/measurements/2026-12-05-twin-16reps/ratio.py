#!/usr/bin/env python3
"""Per-policy local/sim ratio of medians of per-run p50/p99, bootstrap CI and
Mann-Whitney p. Usage: ratio.py LOCALDIR SIMDIR [metric...]"""
import json, glob, os, random, sys, statistics
def runs(d):
    out = {}
    for f in glob.glob(os.path.join(d, 'runs', '*', 'run.json')):
        r = json.load(open(f))
        if r.get('status') != 'ok' or not r.get('validity', {}).get('valid', False):
            continue
        out.setdefault(r['algorithm'], []).append(r['load']['success'])
    return out
def mw_p(a, b):
    # two-sided Mann-Whitney U with normal approximation
    import math
    n1, n2 = len(a), len(b)
    allv = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = {}
    i = 0
    r = [0.0] * len(allv)
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1][0] == allv[i][0]:
            j += 1
        for k in range(i, j + 1):
            r[k] = (i + j) / 2 + 1
        i = j + 1
    r1 = sum(r[k] for k in range(len(allv)) if allv[k][1] == 0)
    u = r1 - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    z = (abs(u - mu) - 0.5) / sd
    return math.erfc(z / math.sqrt(2))
L, S = runs(sys.argv[1]), runs(sys.argv[2])
metrics = sys.argv[3:] or ['p50_ms', 'p99_ms']
rng = random.Random(1)
for alg in sorted(L):
    if alg not in S: continue
    for m in metrics:
        a = [x[m] for x in L[alg]]; b = [x[m] for x in S[alg]]
        ratio = statistics.median(a) / statistics.median(b)
        bs = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b))) for _ in range(4000))
        print(f"{alg:15s} {m:7s} local {statistics.median(a):7.1f} (n={len(a)})  sim {statistics.median(b):7.1f} (n={len(b)})  ratio {ratio:.3f} [{bs[100]:.3f}-{bs[3899]:.3f}]  MW p={mw_p(a,b):.3f}")
