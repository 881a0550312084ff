"""Median throughput and ratio to posix per LIBLOCK_SPIN_NS value, from the
sweep's runs.csv files (spin_sweep.sh): python3 summary.py [DIR]."""
import collections
import csv
import glob
import os
import statistics as st
import sys

d0 = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
NS = (2000, 8000, 20000, 60000)
res = collections.defaultdict(list)
for d in sorted(glob.glob(os.path.join(d0, "r*-*"))):
    ns = int(d.rsplit("-", 1)[1])
    by = collections.defaultdict(dict)
    for r in csv.DictReader(open(os.path.join(d, "runs.csv"))):
        if r.get("status") == "ok":
            by[(r["rep"], r["threads"])][r["algorithm"]] = float(r["throughput_cs_per_s"])
    for (rep, t), m in by.items():
        for a, v in m.items():
            if "posix" in m:
                res[(a, t, ns)].append((v, v / m["posix"]))
for t in ("8", "32"):
    print(f"threads {t}: median M CS/s (x posix)")
    print("algorithm".ljust(16) + "".join(f"{ns:>18}" for ns in NS))
    for a in sorted({k[0] for k in res}):
        cells = []
        for ns in NS:
            v = res.get((a, t, ns), [])
            cells.append((f"{st.median(x[0] for x in v) / 1e6:8.2f} ({st.median(x[1] for x in v):4.2f}x)" if v else "-").rjust(18))
        print(a.ljust(16) + "".join(cells))
