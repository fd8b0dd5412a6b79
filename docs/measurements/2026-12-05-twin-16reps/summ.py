#!/usr/bin/env python3
"""Per-algorithm medians across valid runs and p99 ratio to a reference.
usage: summ.py CAMPAIGNDIR [reference]"""
import json, glob, os, random, statistics, sys
d = sys.argv[1]; ref = sys.argv[2] if len(sys.argv) > 2 else 'prequal'
R = {}
for f in sorted(glob.glob(os.path.join(d, 'runs', '*', 'run.json'))):
    r = json.load(open(f))
    if r.get('status') != 'ok' or not r.get('validity', {}).get('valid', False): continue
    R.setdefault(r['algorithm'], []).append(r['load'])
rng = random.Random(1)
def med(xs): return statistics.median(xs)
print(f"{'algorithm':40s} {'n':>2s} {'err%':>6s} {'p50':>6s} {'p99':>7s} {'p99.9':>7s} {'pess p99':>8s}  p99/{ref} [95%]")
for alg, L in R.items():
    p99 = [x['pessimistic']['p99_ms'] for x in L]
    line = f"{alg:40s} {len(L):2d} {100*med([x['error_rate'] for x in L]):6.2f} {med([x['success']['p50_ms'] for x in L]):6.1f} {med([x['success']['p99_ms'] for x in L]):7.1f} {med([x['success']['p999_ms'] for x in L]):7.1f} {med(p99):8.1f}"
    if ref in R and alg != ref:
        b = [x['pessimistic']['p99_ms'] for x in R[ref]]
        bs = sorted(med(rng.choices(p99, k=len(p99))) / med(rng.choices(b, k=len(b))) for _ in range(2000))
        line += f"  {med(p99)/med(b):.3f} [{bs[50]:.2f}-{bs[1949]:.2f}]"
    print(line)
