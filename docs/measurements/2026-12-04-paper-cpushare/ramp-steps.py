import csv, glob, json, os, sys, statistics as st
d = sys.argv[1]; step = int(sys.argv[2]) if len(sys.argv) > 2 else 8
rows = {}
for rd in sorted(glob.glob(d + "/runs/*")):
    r = json.load(open(rd + "/run.json"))
    ts = list(csv.DictReader(open(rd + "/timeseries.csv")))
    steps = []
    for k in range(9):
        sec = [x for x in ts if k*step <= int(x["second"]) < (k+1)*step]
        sent = sum(int(x["sent"]) for x in sec); err = sum(int(x["errors"]) for x in sec)
        p99 = max(float(x["p99_ms"] or 0) for x in sec) if sec else 0
        steps.append((100*err/max(sent,1), p99))
    rows.setdefault(r["algorithm"], []).append(steps)
mult = [0.75*(10/9)**k for k in range(9)]
print("| algorithm | " + " | ".join(f"{m:.2f}x" for m in mult) + " |")
print("|---|" + "---|"*9)
for a, runs in rows.items():
    cells = []
    for k in range(9):
        e = st.median(r[k][0] for r in runs); p = st.median(r[k][1] for r in runs)
        cells.append(f"{e:.1f}% / {p:.0f}" if e >= 0.05 else f"0 / {p:.0f}")
    print(f"| {a} | " + " | ".join(cells) + " |")
