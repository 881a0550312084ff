"""The lockbench experiments of `liblock bench`: contention, threads, headline."""
import json
import os
import subprocess
import sys

from . import _runner

METRICS = ["lat_cycles_mean", "lat_cycles_p50", "lat_cycles_p99", "lat_ns_mean", "throughput_cs_per_s",
           "fairness_jain", "per_thread_min", "per_thread_max"]
FIRST = ["rep", "algorithm", "threads", "workers", "delay_cycles", "lines", "context_lines", "status", "check",
         "lat_cycles_mean", "lat_cycles_p50", "throughput_cs_per_s", "probe_before_ns", "probe_after_ns",
         "probe_ns", "probe_agree", "regime"]


def registry(env):
    out = subprocess.run([env.program("liblock-info")], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def pick_algorithms(env, text):
    known = [a["name"] for a in registry(env)]
    if text in ("all", ""):
        return known
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in known]
    if bad:
        raise SystemExit(f"liblock bench: unknown algorithm(s): {', '.join(bad)} (see `liblock list`)")
    return names


def lockbench_cmd(env, args, algo, threads, delay, lines, duration, label):
    cmd = [env.program("lockbench"), "-a", algo, "-t", str(threads), "-d", str(int(delay)), "-k", str(lines),
           "-c", str(args.context), "-T", str(args.timeout), "--convention", args.convention, "-p", args.pin,
           "-l", label, "-f", "json"]
    if args.count:
        cmd += ["-n", str(args.count)]
    else:
        cmd += ["-D", f"{duration:g}"]
    if args.wait:
        cmd += ["-w", args.wait]
    return cmd


def run(args, env):
    algos = pick_algorithms(env, args.algorithms)
    delays = _runner.parse_list(args.delays, int, "--delays")
    lines = _runner.parse_list(args.lines, int, "--lines")
    if any(d < 0 for d in delays) or any(k < 1 for k in lines):
        raise SystemExit("liblock bench: delays must be >= 0 and lines >= 1")
    exp = args.experiment
    if exp == "threads":
        tlist = _runner.parse_list(args.threads_list, int, "--threads-list")
        if any(t < 1 for t in tlist):
            raise SystemExit("liblock bench: thread counts must be >= 1")
        points = [(t, d, k) for k in lines for d in delays for t in tlist]
    else:
        if args.threads < 1:
            raise SystemExit("liblock bench: --threads must be >= 1")
        points = [(args.threads, d, k) for k in lines for d in delays]
    order = _runner.interleave(points, algos, args.reps)
    duration = args.duration
    if exp == "headline" and duration <= 0 and not args.count:
        # fit the budget: measure the fixed cost of one run (process start,
        # clock calibration, probes, thread start) on the machine as it is now
        import time
        over = 0.0
        for _ in range(2):
            t0 = time.time()
            _runner.run_program(lockbench_cmd(env, args, algos[0], args.threads, 100, 1, 0.001, "calibration"), 60)
            over = max(over, time.time() - t0)
        while args.reps > 3 and len(order) * (over + 0.05) > args.budget:
            args.reps -= 1  # a slow machine: fewer repetitions rather than a demo that overruns
            order = _runner.interleave(points, algos, args.reps)
            print(f"(repetitions reduced to {args.reps} to fit the budget)", file=sys.stderr)
        duration = max(0.03, min(0.5, args.budget / max(1, len(order)) - over))
        print(f"fixed cost per run measured at {over:.2f} s: {duration:.2f} s per run fits the {args.budget:.0f} s budget",
              file=sys.stderr)
    if duration <= 0 and not args.count:
        raise SystemExit("liblock bench: --duration must be > 0")
    d = _runner.out_dir(env, exp, args.out)
    sweep(args, env, exp, algos, points, duration, d)
    return 0


def sweep(args, env, exp, algos, points, duration, d, may_run=None, by_threads=False, plot=True, meta_extra=None):
    """Run lockbench at every point (threads, delay, lines) for every
    algorithm, `args.reps` times, interleaved (_runner.interleave), and write
    runs.csv, summary.csv and meta.json into d, print the table and draw the
    experiment's plot (unless plot is False).  may_run(threads), when given,
    is asked before each run; a run it refuses is not run, and counted (the
    time budget of `liblock bench manycore`).  by_threads: the table has one
    block per (delay, lines) with a column per thread count.  Returns (rows,
    summary, meta, runs not run)."""
    order = _runner.interleave(points, algos, args.reps)
    print(f"liblock bench {exp}: {len(algos)} algorithms x {len(points)} points x {args.reps} reps = {len(order)} runs"
          f" of {'%d CSs/thread' % args.count if args.count else '%.2f s' % duration}; results in {d}", file=sys.stderr)
    prog = _runner.Progress(len(order), args.quiet)
    rows = []
    not_run = 0
    for rep, (t, dl, k), algo in order:
        if may_run is not None and not may_run(t):
            not_run += 1
            prog.step(f"{algo} T={t} d={dl:g} K={k} rep {rep + 1}/{args.reps} [not run: over the time budget]")
            continue
        cmd = lockbench_cmd(env, args, algo, t, dl, k, duration, f"rep{rep}")
        outer = (args.count and args.timeout + 5 or duration + args.timeout + 5) + 5
        for rec in _runner.run_program(cmd, outer):
            rec.setdefault("algorithm", algo)
            rec.setdefault("threads", t)
            rec.setdefault("delay_cycles", dl)
            rec.setdefault("lines", k)
            rec.setdefault("context_lines", args.context)
            rec["rep"] = rep
            _runner.classify(rec, args.probe_tolerance, args.regime_bounds)
            rows.append(rec)
        st = rows[-1].get("status")
        prog.step(f"{algo} T={t} d={dl:g} K={k} rep {rep + 1}/{args.reps}" + ("" if st == "ok" else f" [{st}]"))
    keys = ["threads", "delay_cycles", "lines", "context_lines"]
    summary = _runner.summarise(rows, keys, METRICS, baseline=args.baseline if args.baseline in algos else None,
                          base_metric="lat_cycles_mean")
    if args.baseline in algos:  # throughput ratio too (higher is better)
        idx = {tuple(s.get(k) for k in keys) + (s["algorithm"], s["regime"]): s for s in summary if s.get("n")}
        for s in summary:
            if not s.get("n"):
                continue
            b = idx.get(tuple(s.get(k) for k in keys) + (args.baseline, s["regime"]))
            v, bv = s.get("throughput_cs_per_s_median"), b and b.get("throughput_cs_per_s_median")
            s["throughput_ratio_vs_" + args.baseline] = round(v / bv, 3) if v and bv else ""
    _runner.write_csv(os.path.join(d, "runs.csv"), rows, FIRST)
    _runner.write_csv(os.path.join(d, "summary.csv"), summary,
                ["threads", "delay_cycles", "lines", "context_lines", "algorithm", "regime", "n"])
    dom = _runner.dominant_regime(rows)
    meta = _runner.write_meta(d, env, args, {"experiment": exp, "algorithms": algos, "duration_s": duration,
                                       "dominant_regime": dom, "runs": len(rows), "baseline": args.baseline,
                                       **(meta_extra or {})})
    if dom is None and any(r.get("status") == "ok" for r in rows):
        print_table(exp, rows, summary, algos, args.baseline, None, keys, by_threads)
        print("no run had agreeing probes (the machine is busy?): medians of all ok runs, unfiltered,"
              " shown without ratios; they are NOT comparable across algorithms")
        print_table(exp, rows, _runner.unfiltered_summary(rows, keys, METRICS), algos, args.baseline,
                    _runner.UNFILTERED, keys, by_threads)
    else:
        print_table(exp, rows, summary, algos, args.baseline, dom, keys, by_threads)
        if exp == "headline":
            from . import _claims
            _claims.print_claims(_claims.check(_claims.cycles_from_summary(summary, dom)))
            print()
    if plot and not args.no_plot:
        from . import _plots
        psum, preg = plot_summary(rows, summary, keys)
        if preg == _runner.UNFILTERED:
            print("no run had agreeing probes: the plot shows all ok runs, unfiltered (not comparable)")
        for f in _plots.lockbench_plots(exp, psum, preg, d, meta):
            print(f"plot: {f}")
    print(f"results: {d}/runs.csv, {d}/summary.csv")
    return rows, summary, meta, not_run


def plot_summary(rows, summary, keys=("threads", "delay_cycles", "lines", "context_lines")):
    """(summary, regime) a plot shows: the dominant regime's, or, when no run
    had agreeing probes, the unfiltered medians of every ok run."""
    dom = _runner.dominant_regime(rows)
    if dom is None:
        return _runner.unfiltered_summary(rows, list(keys), METRICS), _runner.UNFILTERED
    return summary, dom


def _fmt(v):
    if v is None or v == "":
        return "-"
    if v >= 1e9:
        return f"{v / 1e9:.2f}G"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    return f"{v:.0f}"


def print_table(exp, rows, summary, algos, baseline, dom, keys, by_threads=False):
    """The table of mean cycles per critical section: a column per point (the first 8), or with
    by_threads one block per (delay, lines), a column per thread count (every point run)."""
    probes = [r["probe_ns"] for r in rows if r.get("probe_ns") not in ("", None)]
    regimes = {}
    for r in rows:
        regimes[r["regime"]] = regimes.get(r["regime"], 0) + 1
    n_dis = sum(1 for r in rows if not r.get("probe_agree"))
    n_bad = sum(1 for r in rows if r.get("status") != "ok")
    print()
    if probes:
        print(f"probe (CPU0<->CPU1 round trip, ns): min {min(probes):.0f}, median {sorted(probes)[len(probes) // 2]:.0f},"
              f" max {max(probes):.0f}; runs per regime: " + ", ".join(f"{k} {v}" for k, v in sorted(regimes.items())))
    print(f"{n_dis} run(s) with disagreeing probes and {n_bad} run(s) not ok are left out of medians and ratios.")
    if dom is None:
        print("no usable run")
        return
    sel = [s for s in summary if s.get("regime") == dom and s.get("n")]
    cols = sorted({tuple(s[k] for k in keys) for s in sel}, key=lambda c: (c[2], c[0], c[1]))
    def colname(c):
        t, dl, k, ctx = c
        cont = {100: "high", 2000000: "low"}.get(int(dl), f"d={int(dl)}")
        return f"{cont} K={k}" + (f" T={t}" if exp == "threads" else "")
    print(f"mean cycles per critical section incl. acquisition, median of the '{dom}' regime runs "
          f"(x = ratio to {baseline}, lower is better):")
    w = 17
    idx = {tuple(s[k] for k in keys) + (s["algorithm"],): s for s in sel}
    allsum = {tuple(s[k] for k in keys) + (s["algorithm"],): s for s in summary if not s.get("n")}

    def block(cols, name):
        """One header line and a line per algorithm; True if a cell is unfiltered."""
        unfiltered = False
        print(f"{'algorithm':<16}" + "".join(f"{name(c):>{w}}" for c in cols))
        for a in algos:
            line = f"{a:<16}"
            for c in cols:
                s = idx.get(c + (a,))
                if s:
                    ratio = s.get("ratio_vs_" + baseline)
                    cell = _fmt(s["lat_cycles_mean_median"]) + (f" ({ratio:.2f}x)" if ratio not in ("", None) else "")
                else:
                    ok = [r["lat_cycles_mean"] for r in rows if r.get("algorithm") == a and r.get("status") == "ok"
                          and tuple(r.get(k) for k in keys) == c and r.get("lat_cycles_mean") not in ("", None)]
                    if ok:
                        unfiltered = True
                        cell = "[" + _fmt(sorted(ok)[len(ok) // 2]) + "]"
                    else:
                        x = allsum.get(c + (a,))
                        cell = (x["excluded"] if x else "no run")[:w - 1]
                line += " " + f"{cell:>{w - 1}}"
            print(line)
        return unfiltered

    unfiltered = False
    if by_threads:
        pts = {tuple(r.get(k) for k in keys) for r in rows if r.get("threads") is not None}
        for k, dl, ctx in sorted({(c[2], c[1], c[3]) for c in pts}, key=lambda g: (g[1], g[0])):
            cont = {100: "high contention", 2000000: "low contention"}.get(int(dl), "delay")
            print(f"{cont} (delay {int(dl)} cycles), {k} shared line{'s' if k != 1 else ''}:")
            bcols = sorted((c for c in pts if (c[2], c[1], c[3]) == (k, dl, ctx)), key=lambda c: c[0])
            unfiltered |= block(bcols, lambda c: f"T={c[0]}")
    else:
        if len(cols) > 8:
            print(f"({len(cols)} points: see summary.csv; showing the first 8)")
            cols = cols[:8]
        unfiltered = block(cols, colname)
    if unfiltered:
        print(f"[n] = no run of this algorithm at this point fell in the '{dom}' regime with agreeing probes:"
              " median of all its ok runs, NOT comparable (no ratio).")
    print()
