"""`liblock bench apps`: the application benchmark.  Ordinary
programs that know nothing of liblock (bench/apps/) run unmodified under
glibc and under the interposer, every algorithm with its default waiting
policy (or --wait), at 8, 16 and 32 threads on this machine's CPUs:

  bbuf     C++ bounded buffer on std::mutex + std::condition_variable
  pyqueue  Python queue.Queue, producers and consumers
  sqlite   THREADS threads on one SQLite connection opened FULLMUTEX

Each run is bounded at --bound times the glibc run of the same round (at
least --min-bound seconds) and killed past it (">10x"); its output is
checked (each program prints "ok" only when its counts add up).  A round is
glibc then every algorithm (order rotated each round) at one (program,
threads) point; the wake-up and ping-pong probes are taken at the start of
each round (bench/wake_probe.c).  Reported: wall time / glibc's of the same
round, median over rounds with min-max.
"""
import json
import os
import signal
import subprocess
import sys
import time

from . import _apps_bound
from . import _memcached_run
from . import _runner
from ._lockexp import registry

APPS = ("bbuf", "pyqueue", "sqlite")
FIRST = ["rep", "app", "threads", "algorithm", "wait", "fifo", "status", "output", "seconds", "glibc_seconds",
         "ratio_vs_glibc", "bound_s", "wake_ns", "wake_same_ns", "probe_ns"]
NONFIFO_MAX_RATIO = 2.0


def add_arguments(sub, common):
    sp = sub.add_parser("apps", help="real programs (C++ bounded buffer, Python queue.Queue, sqlite3) under the "
                                     "interposer, time / glibc's, every algorithm")
    common(sp, reps=3, unused=("timeout", "probe_tolerance", "regimes"))  # bounded by --bound; probes recorded
    sp.add_argument("--algorithms", "--locks", dest="algorithms", default="all",
                    help="comma-separated names, or 'all' (default)")
    sp.add_argument("--apps", default=",".join(APPS), help=f"programs (default {','.join(APPS)})")
    sp.add_argument("--threads-list", default="8,16,32", help="thread counts (default 8,16,32)")
    sp.add_argument("--wait", help="waiting policy for every algorithm that has it (default: each algorithm's own)")
    sp.add_argument("--cond", choices=["fifo", "mostly-lifo", "glibc"],
                    help="the interposer's kind of condition variable (LIBLOCK_COND; default: the interposer's own, "
                         "docs/interpose.md)")
    sp.add_argument("--bound", type=float, default=10.0,
                    help="a run is killed past this many times the glibc run of its round (default 10)")
    sp.add_argument("--min-bound", type=float, default=1.0, help="... but never before this many seconds (default 1)")
    sp.add_argument("--scale", type=float, default=1.0,
                    help="work per program relative to the default (bbuf 50,000 items, pyqueue 20,000 items, "
                         "sqlite 40,000 inserts; default 1)")
    sp.add_argument("program", nargs="?", choices=["memcached"],
                    help="memcached: the real-code acceptance of `liblock transform` instead (docs/memcached.md)")
    _memcached_run.add_arguments(sp)
    sp.add_argument("--all-rounds", action="store_true",
                    help="run every round even when an algorithm's median at a point is already decided past the "
                         "bound (default: skip it, see docs/bench.md)")
    _apps_bound.add_arguments(sp)


def app_cmd(env, app, threads, scale):
    root = env.root or ""
    if app == "bbuf":
        return [env.program(os.path.join("apps", "bbuf")), str(threads), str(max(1, int(50000 * scale)))]
    if app == "pyqueue":
        path = os.path.join(root, "bench", "apps", "pyqueue.py")
        if not os.path.exists(path):
            raise SystemExit(f"liblock bench apps: {path} is missing (run from the source tree)")
        return [sys.executable, path, str(threads), str(max(1, int(20000 * scale)))]
    if app == "sqlite":
        p = os.path.join(env.bindir, "apps", "sqlite_threads")
        if not os.path.exists(p):
            raise SystemExit(f"liblock bench apps: {p} is missing (install libsqlite3-dev, scripts/deps.sh, then make)")
        return [p, str(threads), str(max(1, int(40000 * scale) // threads))]
    raise SystemExit(f"liblock bench apps: unknown program '{app}' (valid: {', '.join(APPS)})")


_current = []  # the program running now, killed if we are interrupted


def _kill_current(*_):
    for p in _current:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    raise SystemExit("liblock bench apps: interrupted (the runs so far are in runs.csv)")


def run_once(cmd, envd, bound, err_out=None, ok_last=False):
    """(status, seconds, first output line).  status: ok, bound (killed past
    the bound), failed (exit status or output not "ok": its first line, or
    with ok_last its last, as kccachetest prints it).  err_out: a list the
    program's stderr is appended to when it exits."""
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=envd,
                             start_new_session=True)
    except OSError as e:
        return "failed", None, f"cannot run: {e.strerror}"
    _current[:] = [p]
    try:
        out, err = p.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate()
        return "bound", time.monotonic() - t0, ""
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        raise
    finally:
        _current[:] = []
    dt = time.monotonic() - t0
    if err_out is not None:
        err_out.append(err)
    line = (out.strip().splitlines() or [""])[-1 if ok_last else 0]
    if p.returncode != 0 or not line.startswith("ok"):
        e = (err.strip().splitlines() or [""])[-1]
        return "failed", dt, f"exit {p.returncode}: {line or e}"[:200]
    return "ok", dt, line


def run(args, env):
    if args.program == "memcached":
        return _memcached_run.run(args, env)
    reg = {a["name"]: a for a in registry(env)}
    if args.algorithms in ("all", ""):
        algos = list(reg)
    else:
        algos = [x.strip() for x in args.algorithms.split(",") if x.strip()]
        bad = [a for a in algos if a not in reg]
        if bad:
            raise SystemExit(f"liblock bench: unknown algorithm(s): {', '.join(bad)} (see `liblock list`)")
    apps = [x.strip() for x in args.apps.split(",") if x.strip()]
    for a in apps:
        if a not in APPS:
            raise SystemExit(f"liblock bench apps: unknown program '{a}' (valid: {', '.join(APPS)})")
    tlist = _runner.parse_list(args.threads_list, int, "--threads-list")
    if any(t < 2 for t in tlist):
        raise SystemExit("liblock bench apps: thread counts must be >= 2 (producers and consumers)")
    if args.bound <= 1 or args.min_bound <= 0 or args.scale <= 0:
        raise SystemExit("liblock bench apps: --bound must be > 1, --min-bound and --scale > 0")
    lib = env.lib("liblock-interpose.so")
    if not os.path.exists(lib):
        raise SystemExit(f"liblock bench apps: {lib} is missing (run `make` first)")
    cmds = {(a, t): app_cmd(env, a, t, args.scale) for a in apps for t in tlist}
    d = _runner.out_dir(env, "apps", args.out)
    points = [(a, t) for a in apps for t in tlist]
    total = args.reps * len(points) * (len(algos) + 1)
    if args.count_scale > 0:  # the counted runs of the hand-off bound (_apps_bound.py)
        total += len(points) * (1 + sum(1 for a in algos if "fifo" in reg[a]["properties"]))
    print(f"liblock bench apps: {len(apps)} programs x threads {','.join(map(str, tlist))} x ({len(algos)} algorithms"
          f" + glibc) x {args.reps} rounds = up to {total} runs, each bounded at {args.bound:g}x the glibc run of its "
          f"round (>= {args.min_bound:g} s); {os.cpu_count()} CPUs; results in {d}", file=sys.stderr)
    load0 = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ""
    import datetime
    date0 = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    prog = _runner.Progress(total, args.quiet)
    rows = []
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("LIBLOCK_") and k != "LD_PRELOAD"}
    hits = {}  # (app, t, algo) -> runs that hit the bound
    signal.signal(signal.SIGTERM, _kill_current)
    for rep in range(args.reps):
        pr = _runner.probes(env)
        for (app, t) in points:
            cmd = cmds[(app, t)]
            st, g, line = run_once(cmd, base_env, 120.0)
            rows.append({"rep": rep, "app": app, "threads": t, "algorithm": "glibc", "wait": "", "fifo": "",
                         "status": st, "output": line, "seconds": round(g, 4) if g else "", "glibc_seconds":
                         round(g, 4) if g and st == "ok" else "", "ratio_vs_glibc": 1.0 if st == "ok" else "",
                         "bound_s": 120.0, **pr})
            prog.step(f"{app} T={t} glibc round {rep + 1}/{args.reps}" + ("" if st == "ok" else f" [{st}]"))
            gl = g if st == "ok" else None
            bound = max(args.min_bound, args.bound * gl) if gl else 120.0
            n = len(algos)
            for i in range(n):
                algo = algos[(i + rep) % n]
                info = reg[algo]
                wait = args.wait if args.wait and args.wait in info["policies"] else None
                row = {"rep": rep, "app": app, "threads": t, "algorithm": algo,
                       "wait": wait or info.get("default_policy", ""), "fifo": int("fifo" in info["properties"]),
                       "glibc_seconds": round(gl, 4) if gl else "", "bound_s": round(bound, 3), **pr}
                k = (app, t, algo)
                if not args.all_rounds and hits.get(k, 0) > args.reps // 2:
                    row.update(status="skipped", output="median already past the bound", seconds="",
                               ratio_vs_glibc="")
                else:
                    e = dict(base_env, LD_PRELOAD=lib, LIBLOCK_LOCK=algo, LIBLOCK_STRICT="1")
                    if args.cond:
                        e["LIBLOCK_COND"] = args.cond
                    if wait:
                        e["LIBLOCK_WAIT"] = wait
                    st, s, line = run_once(cmd, e, bound)
                    if st == "bound":
                        hits[k] = hits.get(k, 0) + 1
                    row.update(status=st, output=line, seconds=round(s, 4) if s else "",
                               ratio_vs_glibc=round(s / gl, 3) if st == "ok" and gl else "")
                rows.append(row)
                prog.step(f"{app} T={t} {algo} round {rep + 1}/{args.reps}"
                          + ("" if row["status"] == "ok" else f" [{row['status']}]"))
            _runner.write_csv(os.path.join(d, "runs.csv"), rows, FIRST)  # so far: an interrupted run keeps its data
    brows = _apps_bound.run(args, env, run_once, app_cmd, points, algos, reg, base_env, lib, rows, prog)
    if brows:
        _runner.write_csv(os.path.join(d, "bound.csv"), brows, _apps_bound.BOUND_FIELDS)
    summary = summarise(rows, apps, tlist, ["glibc"] + algos, args)
    _runner.write_csv(os.path.join(d, "runs.csv"), rows, FIRST)
    _runner.write_csv(os.path.join(d, "summary.csv"), summary, ["app", "threads", "algorithm"])
    meta = _runner.write_meta(d, env, args, {"experiment": "apps", "algorithms": algos, "apps": apps, "threads": tlist,
                                       "bound": args.bound, "min_bound_s": args.min_bound, "scale": args.scale,
                                       "commands": {f"{a} T={t}": " ".join(c) for (a, t), c in cmds.items()},
                                       "ncpus": os.cpu_count(), "runs": len(rows), "loadavg_start": load0, "date_utc_start": date0})
    verdicts = print_tables(rows, summary, apps, tlist, algos, reg, args)
    _apps_bound.print_table(brows, args)
    meta["targets"] = verdicts
    meta["count_scale"] = args.count_scale
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    if not args.no_plot:
        from . import _plots
        f = _plots.apps_plot(summary, apps, tlist, algos, args.bound, meta, os.path.join(d, "apps.png"))
        if f:
            print(f"plot: {f}")
    print(f"results: {d}/runs.csv, {d}/summary.csv, {d}/meta.json")
    return 0


def summarise(rows, apps, tlist, algos, args):
    """Per (app, threads, algorithm): the median over rounds of time / glibc,
    counting a run killed past the bound (or skipped because its median was
    already decided) as past the bound."""
    out = []
    for app in apps:
        for t in tlist:
            for a in algos:
                rs = [r for r in rows if r["app"] == app and r["threads"] == t and r["algorithm"] == a]
                if not rs:
                    continue
                vals, over, failed, ok = [], 0, 0, 0
                for r in rs:
                    if r["status"] == "ok" and r["ratio_vs_glibc"] != "":
                        vals.append(r["ratio_vs_glibc"])
                        ok += 1
                    elif r["status"] in ("bound", "skipped"):
                        vals.append(float("inf"))
                        over += 1
                    elif r["status"] == "failed":
                        failed += 1
                vals.sort()
                med = vals[len(vals) // 2] if len(vals) % 2 else (
                    (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2 if vals else None)
                fin = [v for v in vals if v != float("inf")]
                gs = [r["seconds"] for r in rs if a == "glibc" and r["status"] == "ok"]
                out.append({"app": app, "threads": t, "algorithm": a, "wait": rs[0]["wait"], "fifo": rs[0]["fifo"],
                            "runs": len(rs), "ok": ok, "past_bound": over, "failed": failed,
                            "ratio_median": med, "ratio_min": min(fin) if fin else None,
                            "ratio_max": max(vals) if vals else None,
                            "glibc_seconds_median": sorted(gs)[len(gs) // 2] if gs else None,
                            "failures": "; ".join(sorted({r["output"] for r in rs if r["status"] == "failed"}))[:300]})
    return out


def _cell(s, bound):
    if not s:
        return "-"
    if s["failed"]:
        return f"FAILED {s['failed']}/{s['runs']}"
    m = s["ratio_median"]
    if m is None:
        return "no run"
    if m == float("inf"):
        return f">{bound:g}x ({s['past_bound']}/{s['runs']})"
    hi = s["ratio_max"]
    hi_s = f">{bound:g}" if hi == float("inf") else f"{hi:.2f}"
    return f"{m:.2f}x [{s['ratio_min']:.2f}-{hi_s}]"


def print_tables(rows, summary, apps, tlist, algos, reg, args):
    idx = {(s["app"], s["threads"], s["algorithm"]): s for s in summary}
    pp = [_runner._num(r.get("probe_ns")) for r in rows if r["algorithm"] == "glibc" and _runner._num(r.get("probe_ns"))]
    print()
    print(f"application benchmark on {os.cpu_count()} CPUs, policy "
          f"{'--wait ' + args.wait if args.wait else 'each algorithm default'}, {args.reps} rounds; wall time / glibc's in"
          f" the same round, median [min-max]; '>{args.bound:g}x (k/n)': k of n runs killed past the bound "
          f"(or skipped once the median was decided)")
    per_round = {}
    for r in rows:
        if _runner._num(r.get("wake_ns")):
            per_round.setdefault(r["rep"], (_runner._num(r["wake_ns"]), _runner._num(r.get("wake_same_ns"))))
    if per_round:
        print("wake-up probe per round (other CPU / same CPU): "
              + ", ".join(f"{c / 1e3:.1f}/{(s or 0) / 1e3:.1f} us" for _, (c, s) in sorted(per_round.items()))
              + (f"; ping-pong probe median {sorted(pp)[len(pp) // 2]:.0f} ns" if pp else ""))
    w = 26
    for app in apps:
        print()
        print(f"{app}: " + {"bbuf": "C++ std::mutex + std::condition_variable bounded buffer",
                            "pyqueue": "Python queue.Queue", "sqlite": "sqlite3, one FULLMUTEX connection"}[app])
        print(f"{'algorithm':<15} {'policy':<15} " + "".join(f"{str(t) + ' threads':>{w}}" for t in tlist))
        g = [idx.get((app, t, "glibc")) for t in tlist]
        gcells = [f"{s['glibc_seconds_median']:.3f} s" if s and s["glibc_seconds_median"] else "-" for s in g]
        print(f"{'glibc':<15} {'(seconds)':<15} " + "".join(f"{c:>{w}}" for c in gcells))
        for a in algos:
            ss = [idx.get((app, t, a)) for t in tlist]
            pol = next((s["wait"] for s in ss if s), "")
            print(f"{a:<15} {str(pol):<15} " + "".join(f"{_cell(s, args.bound):>{w}}" for s in ss))
    print()
    print(f"application target: every non-FIFO algorithm within {NONFIFO_MAX_RATIO:g}x of glibc on each program and thread"
          " count; FIFO locks: slowdown to be explained by the hand-off bound (`liblock bench oversubscription`)")
    verdicts = {}
    for a in algos:
        fifo = "fifo" in reg[a]["properties"]
        bad = []
        for s in summary:
            if s["algorithm"] != a:
                continue
            m = s["ratio_median"]
            if s["failed"]:
                bad.append(f"{s['app']} T={s['threads']}: wrong output or exit ({s['failed']} runs)")
            elif m is None or m > NONFIFO_MAX_RATIO:
                bad.append(f"{s['app']} T={s['threads']}: " + ("no run" if m is None else
                                                                 f">{args.bound:g}x" if m == float("inf") else f"{m:.2f}x"))
        if fifo:
            v = "FIFO: " + ("within 2x everywhere" if not bad else "slower than 2x at " + ", ".join(bad))
        else:
            v = "meets" if not bad else "MISSES  " + " | ".join(bad)
        verdicts[a] = v
        print(f"  {a:<15} {v}")
    return verdicts
