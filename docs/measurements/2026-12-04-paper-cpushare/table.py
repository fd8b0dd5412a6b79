import glob, json, sys, statistics as st
def load(d):
    rows = {}
    for rd in sorted(glob.glob(d + "/runs/*")):
        r = json.load(open(rd + "/run.json")); l = r["load"]
        rows.setdefault(r["algorithm"], []).append((l["p50_ms"], l["p99_ms"], l["p999_ms"], 100*l["error_rate"]))
    return {a: tuple(st.median(x[i] for x in v) for i in range(4)) for a, v in rows.items()}
ds = [load(d) for d in sys.argv[1:]]
order = sorted(ds[-1], key=lambda a: ds[-1][a][1])
for a in order:
    cells = []
    for d in ds:
        p50, p99, p999, e = d.get(a, (0,0,0,0))
        cells.append(f"{p50:.0f} / {p99:.0f}" + (f" ({e:.1f}% err)" if e >= 0.05 else ""))
    print(f"| {a} | " + " | ".join(cells) + " |")
