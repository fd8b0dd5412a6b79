#!/usr/bin/env python3
"""Per-step (8 s) errors and p99 (median over runs of the max per-second p99
in the step) per algorithm for campaign dirs. usage: ramp.py DIR..."""
import csv, glob, json, os, statistics, sys
for d in sys.argv[1:]:
    print('==', d)
    A = {}
    for f in sorted(glob.glob(os.path.join(d, 'runs', '*', 'run.json'))):
        r = json.load(open(f))
        if r.get('status') != 'ok': continue
        ts = os.path.join(os.path.dirname(f), 'timeseries.csv')
        if not os.path.exists(ts): continue
        rows = list(csv.DictReader(open(ts)))
        steps = {}
        for row in rows:
            k = int(row['second']) // 8
            s = steps.setdefault(k, [0, 0, []])
            s[0] += int(row['sent']); s[1] += int(row['errors'])
            if row['p99_ms']: s[2].append(float(row['p99_ms']))
        A.setdefault(r['algorithm'], []).append(steps)
    for alg, runs in sorted(A.items()):
        cells = []
        for k in range(9):
            errs = [100 * s[k][1] / max(1, s[k][0]) for s in runs if k in s]
            p99 = [statistics.median(s[k][2]) for s in runs if k in s and s[k][2]]
            if not errs: continue
            cells.append(f"{statistics.median(errs):5.1f}%/{statistics.median(p99) if p99 else float('nan'):5.0f}")
        print(f"{alg:14s} n={len(runs)} " + ' '.join(cells))
