"""`liblock bench report`: BENCHMARKS.md and its tables.

Without a directory it regenerates BENCHMARKS.md: every section's benchmark
run, reduced to bench/report/SECTION.csv, rendered through
bench/report/BENCHMARKS.md.in (_report_run.py; `make benchmarks`).

With directories (`liblock bench report DIR...`) it prints the Markdown
tables of results directories written by `liblock bench oversubscription`
and `liblock bench apps` (their summary.csv and meta.json), each with its
own header line (command, date, commit, load), so a before and an after run
can be set side by side."""
import csv
import json
import os
import sys

from . import _apps_bound
from . import _report_run


def add_arguments(sub):
    sp = sub.add_parser("report", help="regenerate BENCHMARKS.md (every section's benchmark, reduced to "
                        "bench/report/*.csv); with DIRs: print the tables of oversubscription/apps results")
    sp.add_argument("dirs", nargs="*", metavar="DIR",
                    help="results directory of `bench oversubscription` or `bench apps` (holds summary.csv and "
                         "meta.json): print its tables instead of regenerating BENCHMARKS.md")
    sp.add_argument("--locks", default="", help="with DIRs: only these algorithms (comma-separated; default every one)")
    _report_run.add_arguments(sp)


def _f(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _rate(v):
    v = _f(v)
    if v is None:
        return "–"
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e3:
        return f"{v / 1e3:.1f} k"
    return f"{v:.0f}"


def _x(v, paren=False):
    v = _f(v)
    if v is None:
        return "–"
    s = f"{v:.2f}×" if v < 10 else f"{v:.0f}×"
    return f"({s})" if paren else s


def _load(d):
    mp, sp = os.path.join(d, "meta.json"), os.path.join(d, "summary.csv")
    if not os.path.isfile(mp) or not os.path.isfile(sp):
        raise SystemExit(f"liblock bench report: {d}: not a results directory (needs meta.json and summary.csv)")
    try:
        with open(mp) as f:
            meta = json.load(f)
        with open(sp, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, ValueError) as e:
        raise SystemExit(f"liblock bench report: {d}: unreadable results ({e})")
    return meta, rows


def _header(d, meta):
    load = meta.get("loadavg_start") or meta.get("loadavg") or []
    print(f"`{meta.get('command', '?')}` — {meta.get('date_utc_start', meta.get('date_utc', '?'))}, commit "
          f"{meta.get('git_commit', '?')}, load average at start {load[0] if load else '?'} ({d})")
    print()


def _oversub(d, meta, rows, keep):
    tl = [int(t) for t in meta.get("threads", [])] or sorted({int(r["threads"]) for r in rows})
    base = meta.get("baseline", "posix")
    idx = {(int(r["threads"]), r["algorithm"]): r for r in rows}
    algos = [a for a in meta.get("algorithms", []) if not keep or a in keep or a == base]
    _header(d, meta)
    wk = []
    for t in tl:
        w = [_f(idx[(t, a)]["wake_ns_median"]) for a in algos if (t, a) in idx and _f(idx[(t, a)]["wake_ns_median"])]
        wk.append(f"{sorted(w)[len(w) // 2] / 1e3:.1f} µs at {t} threads" if w else f"– at {t} threads")
    pp = [_f(r["probe_ns_median"]) for r in rows if _f(r.get("probe_ns_median"))]
    print(f"Wake-up probe (other CPU), median over algorithms: {', '.join(wk)}; ping-pong probe medians "
          f"{min(pp):.0f}–{max(pp):.0f} ns." if pp else f"Wake-up probe: {', '.join(wk)}.")
    print()
    head = "| algorithm | policy | FIFO |"
    sep = "|---|---|---|"
    for t in tl:
        head += f" {t} thr: CS/s | × {base} | hand-off ÷ wake |"
        sep += "--:|--:|--:|"
    ceil = meta.get("ceiling") and any(_f(r.get("ceiling_ratio_median")) is not None for r in rows)
    if ceil:
        head += f" ceiling: {meta.get('ncpus', '?')} thr, spin, × {base} |"
        sep += "--:|"
    alt = any(_f(r.get("alt_bound_median")) is not None or _f(r.get("rpc_bound_median")) is not None for r in rows)
    if alt:
        head += f" bound, × {base} ({' / '.join(f'{t}' for t in tl)} thr) |"
        sep += "--:|"
    head += " completed | target |"
    sep += "--:|---|"
    print(head)
    print(sep)
    for a in algos:
        cells, done, why, meets = [], [], [], []
        fifo = False
        pol = ""
        for t in tl:
            r = idx.get((t, a))
            if not r:
                cells += ["–", "–", "–"]
                done.append("–")
                continue
            fifo = r["fifo"] == "1"
            pol = r["wait"]
            ok = int(r["completed"]) > 0
            cells += [_rate(r["throughput_cs_per_s_median"]) if ok else "did not complete",
                      _x(r["ratio_vs_baseline_median"]) if a != base else "1.00×",
                      _x(r["handoff_over_wake_median"], paren=not fifo)]
            done.append(f"{r['completed']}/{r['runs']}")
            meets.append(r.get("meets", ""))
            if r.get("why"):
                why.append(f"{t} thr: {r['why']}")
        if a == base:
            verdict = "baseline"
        elif all(m == "1" for m in meets):
            verdict = "meets"
        elif any(m == "0" for m in meets):
            verdict = "misses (" + "; ".join(why) + ")"
        else:
            verdict = "unknown (" + "; ".join(why) + ")"
        if ceil:
            c = next((_f(idx[(t, a)].get("ceiling_ratio_median")) for t in tl if (t, a) in idx), None)
            cells.append("1.00×" if a == base else _x(c) if c is not None else "–")
        if alt:
            bs = [(_f(idx[(t, a)].get("alt_bound_median")) if _f(idx[(t, a)].get("alt_bound_median")) is not None
                   else _f(idx[(t, a)].get("rpc_bound_median"))) if (t, a) in idx else None for t in tl]
            cells.append(" / ".join(_x(b) if b is not None else "–" for b in bs) if any(b is not None for b in bs)
                         else "–")
        print(f"| {a} | {pol} | {'yes' if fifo else 'no'} | " + " | ".join(cells) + f" | {', '.join(done)} | {verdict} |")
    if ceil:
        print()
        print(f"Ceiling: the same workload with as many threads as CPUs ({meta.get('ncpus', '?')}) and pure spin, "
              f"in the same rounds (non-FIFO algorithms): what the algorithm reaches here before oversubscription "
              f"costs anything.")
    if alt:
        print()
        print(f"Bound: the most a lock that hands over to another thread as often as this one did can reach here, "
              f"× {base}: the alternation probe of the same runs (two threads on the two CPUs taking strict turns at "
              f"the critical section) ÷ {base}'s throughput ÷ hand-offs per critical section; not for delegating "
              f"locks. For a lock with a dedicated server (rcl): the delegation probe (one client sending each "
              f"critical section to a server on the other CPU) × the CPUs left to clients ÷ {base}'s throughput "
              f"(docs/bench.md).")
    print()


def _apps(d, meta, rows, keep):
    apps = meta.get("apps") or sorted({r["app"] for r in rows})
    tl = [int(t) for t in meta.get("threads", [])] or sorted({int(r["threads"]) for r in rows})
    bound = _f(meta.get("bound")) or 10.0
    idx = {(r["app"], int(r["threads"]), r["algorithm"]): r for r in rows}
    algos = [a for a in meta.get("algorithms", []) if not keep or a in keep]
    _header(d, meta)
    cols = [(app, t) for app in apps for t in tl]
    print("| algorithm | policy | " + " | ".join(f"{app} {t}" for app, t in cols) + " |")
    print("|---|---|" + "--:|" * len(cols))
    g = [idx.get((app, t, "glibc")) for app, t in cols]
    print("| glibc (s) | | " + " | ".join(f"{_f(s['glibc_seconds_median']):.3f}" if s and _f(s["glibc_seconds_median"])
                                         else "–" for s in g) + " |")
    for a in algos:
        cells, pol = [], ""
        for app, t in cols:
            s = idx.get((app, t, a))
            if not s:
                cells.append("–")
                continue
            pol = s["wait"]
            m = _f(s["ratio_median"])
            if s["failed"] not in ("", "0"):
                cells.append(f"FAILED {s['failed']}/{s['runs']}")
            elif m is None:
                cells.append("no run")
            elif m == float("inf"):
                cells.append(f">{bound:g}×")
            else:
                cells.append(f"**{m:.2f}×**" if m > 2 else f"{m:.2f}×")
        print(f"| {a} | {pol} | " + " | ".join(cells) + " |")
    print()
    print(f"Each cell: median over the rounds of wall time ÷ glibc's in the same round ({meta.get('runs', '?')} runs "
          f"in all); bold: above 2×; >{bound:g}×: killed at the bound (or skipped once the median was decided).")
    print()
    bp = os.path.join(d, "bound.csv")
    if os.path.isfile(bp):
        with open(bp, newline="") as f:
            brows = [r for r in csv.DictReader(f) if not keep or r["algorithm"] in keep]
        cs = _f(meta.get("count_scale"))
        print(f"Hand-off bound of the FIFO locks (counted runs at {cs:g} × the work; N acquisitions, T wall time, "
              f"W wake-up probe; bound = N × W ÷ glibc's time; Tg glibc's time; explained: (T − Tg)/N ≤ 2 W):" if cs else
              "Hand-off bound of the FIFO locks:")
        print()
        print("| program | threads | algorithm | N | T (s) | × glibc | bound | T/N | (T − Tg)/N | ÷ W | verdict |")
        print("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|---|")
        for r in brows:
            if r["status"] != "ok" or not r.get("acquisitions"):
                print(f"| {r['app']} | {r['threads']} | {r['algorithm']} | – | – | – | – | – | – | – | no count ({r['status']}) |")
                continue
            pa = _f(r.get("per_acq_ns"))
            ex, exw, ok = _apps_bound.verdict(r)
            v = {1: "explained", 0: "**not explained**"}.get(ok, "–")
            print(f"| {r['app']} | {r['threads']} | {r['algorithm']} | {r['acquisitions']} | {r['seconds']} | "
                  f"{_x(r.get('ratio_vs_glibc'))} | {_x(r.get('bound_ratio'))} | "
                  f"{f'{pa / 1e3:.1f} µs' if pa else '–'} | {f'{ex / 1e3:.1f} µs' if ex is not None else '–'} | "
                  f"{f'{exw:.2f}' if exw is not None else '–'} | {v} |")
        print()


def run(args, env):
    if not args.dirs:
        return _report_run.run(args, env)
    keep = {x.strip() for x in args.locks.split(",") if x.strip()}
    for d in args.dirs:
        meta, rows = _load(d)
        exp = meta.get("experiment")
        if exp == "oversubscription":
            _oversub(d, meta, rows, keep)
        elif exp == "apps":
            _apps(d, meta, rows, keep)
        else:
            print(f"liblock bench report: {d}: experiment '{exp}' has no report table (its run printed one)",
                  file=sys.stderr)
            return 2
    return 0
