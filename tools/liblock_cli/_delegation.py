"""`liblock bench delegation`: the delegation benchmark of D. Petrovic,
"Efficient Communication and Synchronization on Manycore Processors", PhD
thesis no. 6552, EPFL, 2015, sections 6.2 and 7.2.  Threads do an
operation on a shared object (counter, stack, one- or two-lock MS queue;
bench/delegation/objects.h) through liblock_execute, then pause a random
0..1000 cycles; 10 runs of 1 s per point, interleaved.  Throughput, mean
latency, fairness (max/min operations per thread), combining rate, CAS per
operation and server cycles per request where the algorithm exposes them,
the ping-pong probe of every run.

A configuration is an algorithm with settings.  mp-server variants use the
thesis's names: srv-base (Algorithm 5), srv-B<N> (client back-off of N
cycles), srv-adaptive (learnt back-off), srv-SS (streaming-store replies),
srv-shuf (random scan order: the control experiment), srv-stride2 (a slot
every second line), combined with '-' (srv-B1500-SS, srv-base-shuf).
hybcomb-M<N> is hybcomb with MAX_OPS = N; "faa" is the counter by one
atomic fetch-and-add (not a lock).

One run is `delegation` (bench/delegation.c).  A round is one run of every
configuration at one (object, threads) point, in an order rotated by one
each round.
"""
import json
import os
import statistics
import subprocess
import sys

from . import _runner
from ._lockexp import registry

FIRST = ["rep", "object", "threads", "config", "algorithm", "status", "check", "throughput_ops_per_s",
         "ratio_vs_base", "latency_ns_mean", "latency_cycles_mean", "cycles_per_op", "fairness_max_min",
         "combining_rate", "cas_per_op", "server_busy_cycles_per_op", "probe_ns", "probe_agree", "regime"]
METRICS = ["throughput_ops_per_s", "ratio_vs_base", "latency_ns_mean", "cycles_per_op", "fairness_max_min",
           "combining_rate", "cas_per_op", "server_busy_cycles_per_op"]
DEFAULT_ALGOS = "mp-server,rcl,cc-synch,flat-combining,hybcomb,faa"
OPTIONAL = ("hybcomb", "hyblock")  # built by another branch: skipped with a note when absent
DEFAULT_VARIANTS = "base,B1500,B5000,adaptive,SS,B1500-SS,base-shuf,B1500-shuf,stride2"


def add_arguments(sub, common):
    sp = sub.add_parser("delegation",
                        help="the delegation benchmark of Petrovic's thesis (EPFL 2015): objects through liblock_execute, op + random pause; "
                             "mp-server back-off/streaming variants, MAX_OPS and back-off sweeps, slot shuffle")
    common(sp, reps=10)
    sp.add_argument("--algorithms", "--locks", dest="algorithms", default=DEFAULT_ALGOS,
                    help=f"comma-separated names ('faa': atomic fetch-and-add counter; algorithms not built here are "
                         f"skipped with a note) (default {DEFAULT_ALGOS})")
    sp.add_argument("--variants", default=DEFAULT_VARIANTS,
                    help=f"mp-server configurations (default {DEFAULT_VARIANTS})")
    sp.add_argument("--backoffs", default="",
                    help="back-off sweep: adds srv-B<N> for each N (cycles), and srv-B<N>-SS with --stream-sweep")
    sp.add_argument("--stream-sweep", action="store_true", help="with --backoffs: also each back-off with SS")
    sp.add_argument("--max-ops", default="", help="hybcomb MAX_OPS sweep, comma-separated (default: its default)")
    sp.add_argument("--objects", default="counter", help="counter,stack,queue1,queue2 (default counter)")
    sp.add_argument("--threads-list", default="1,4,16", help="client threads (default 1,4,16)")
    sp.add_argument("--pause", type=int, default=1000, help="random pause after each operation: 0..N cycles "
                    "(default 1000, section 7.2)")
    sp.add_argument("--duration", type=float, default=1.0, help="seconds per run (default 1)")
    sp.add_argument("--server-cpu", type=int, default=0, help="CPU kept for servers; clients use the others "
                    "(default 0; -1: no server CPU, clients everywhere)")
    sp.add_argument("--placement", default="server", choices=["server", "all", "none"],
                    help="client threads: off the server CPU (default), on every CPU, or not pinned")
    sp.add_argument("--wait", help="waiting policy for every algorithm that has it (default: each algorithm's own)")
    sp.add_argument("--baseline", default="srv-base", help="ratios are against this configuration (default srv-base)")
    sp.add_argument("--quick", action="store_true", help="smoke test: 1 round of 0.1 s, threads 2")


def _variant_env(tok):
    env, parts = {}, tok.split("-")
    for p in parts:
        if p == "base":
            continue
        if p == "SS":
            env["LIBLOCK_MPSERVER_STREAM"] = "1"
        elif p == "shuf":
            env["LIBLOCK_MPSERVER_SHUFFLE"] = "1"
        elif p == "stride2":
            env["LIBLOCK_MPSERVER_STRIDE"] = "2"
        elif p == "adaptive":
            env["LIBLOCK_MPSERVER_BACKOFF"] = "adaptive"
        elif p.startswith("B") and p[1:].isdigit():
            env["LIBLOCK_MPSERVER_BACKOFF"] = p[1:]
        else:
            raise SystemExit(f"liblock bench delegation: unknown mp-server variant part '{p}' in '{tok}' "
                             f"(base, B<cycles>, adaptive, SS, shuf, stride2)")
    return env


def configs_of(args, reg):
    """[(name, algorithm, env)] and the notes about what was left out."""
    out, notes = [], []
    algos = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    for a in algos:
        if a == "faa":
            out.append(("faa", "faa", {}))
        elif a not in reg and a in OPTIONAL:
            notes.append(f"{a}: not in this build's registry (skipped)")
        elif a not in reg:
            raise SystemExit(f"liblock bench delegation: unknown algorithm '{a}' (see `liblock list`; 'faa' is the "
                             f"fetch-and-add counter)")
        elif a == "mp-server":
            toks = [v.strip() for v in args.variants.split(",") if v.strip()]
            for b in _runner.parse_list(args.backoffs, int, "--backoffs") if args.backoffs else []:
                toks.append(f"B{b}")
                if args.stream_sweep:
                    toks.append(f"B{b}-SS")
            seen = set()
            for t in toks:
                if t not in seen:
                    seen.add(t)
                    out.append(("srv-" + t, a, _variant_env(t)))
        elif a == "hybcomb" and args.max_ops:
            for m in _runner.parse_list(args.max_ops, int, "--max-ops"):
                if m < 1:
                    raise SystemExit("liblock bench delegation: --max-ops values must be >= 1")
                out.append((f"hybcomb-M{m}", a, {"LIBLOCK_HYBCOMB_MAX_OPS": str(m)}))
        else:
            out.append((a, a, {}))
    return out, notes


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _run_one(prog, cmd, env_extra, bound):
    env = dict(os.environ)
    for k in [k for k in env if k.startswith("LIBLOCK_MPSERVER_") or k == "LIBLOCK_HYBCOMB_MAX_OPS"]:
        del env[k]
    env.update(env_extra)
    try:
        p = subprocess.run([prog] + cmd, capture_output=True, text=True, timeout=bound, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"killed after {bound:.0f} s", "check": "skipped"}
    for line in reversed(p.stdout.splitlines()):
        if line.strip().startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    err = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": "error", "error": f"exit {p.returncode}: {err}", "check": "skipped"}


def run(args, env):
    reg = {a["name"]: a for a in registry(env)}
    if args.quick:
        args.reps, args.duration = 1, 0.1
        if args.threads_list == "1,4,16":
            args.threads_list = "2"
    objects = [o.strip() for o in args.objects.split(",") if o.strip()]
    bad = [o for o in objects if o not in ("counter", "stack", "queue1", "queue2")]
    if bad:
        raise SystemExit(f"liblock bench delegation: unknown object(s): {', '.join(bad)} "
                         f"(counter, stack, queue1, queue2)")
    tlist = _runner.parse_list(args.threads_list, int, "--threads-list")
    if not tlist or any(t < 1 for t in tlist):
        raise SystemExit("liblock bench delegation: thread counts must be >= 1")
    if args.duration <= 0 or args.pause < 0:
        raise SystemExit("liblock bench delegation: --duration must be > 0 and --pause >= 0")
    if args.wait and args.wait not in ("spin", "spin-then-park", "yield", "park", "preempt-aware"):
        raise SystemExit(f"liblock bench delegation: unknown waiting policy '{args.wait}'")
    cfgs, notes = configs_of(args, reg)
    if not cfgs:
        raise SystemExit("liblock bench delegation: no configuration to run (" + "; ".join(notes) + ")")
    names = [c[0] for c in cfgs]
    cmap = {c[0]: c for c in cfgs}
    points = [(o, t) for o in objects for t in tlist]
    order = [(rep, pt, c) for rep, pt, c in _runner.interleave(points, names, args.reps)
             if not (cmap[c][1] == "faa" and pt[0] != "counter")]
    d = _runner.out_dir(env, "delegation", args.out)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    print(f"liblock bench delegation: {len(names)} configurations x objects {','.join(objects)} x threads "
          f"{','.join(map(str, tlist))} x {args.reps} rounds = {len(order)} runs of {args.duration:g} s; "
          f"{os.cpu_count()} CPUs; results in {d}", file=sys.stderr)
    prog = env.program("delegation")
    progress = _runner.Progress(len(order), args.quiet)
    rows = []
    for rep, (obj, t), name in order:
        _, algo, cenv = cmap[name]
        cmd = ["-a", algo, "-o", obj, "-t", str(t), "-D", f"{args.duration:g}", "-P", str(args.pause),
               "-S", str(args.server_cpu), "-c", args.placement, "-T", f"{args.timeout:g}", "-l", f"rep{rep}"]
        if args.wait and algo != "faa" and args.wait in reg[algo]["policies"]:
            cmd += ["-w", args.wait]
        rec = _run_one(prog, cmd, cenv, args.duration + args.timeout + 20)
        rec.update({"rep": rep, "object": obj, "threads": t, "config": name, "algorithm": algo})
        rec["completed"] = int(rec.get("status") == "ok" and rec.get("check") == "ok")
        _runner.classify(rec, args.probe_tolerance, args.regime_bounds)
        rows.append(rec)
        progress.step(f"{name} {obj} T={t} round {rep + 1}/{args.reps}" +
                      ("" if rec["completed"] else f" [{rec.get('status')}/{rec.get('check')}]"))
    base = args.baseline
    bidx = {(r["rep"], r["object"], r["threads"]): r for r in rows if r["config"] == base and r["completed"]}
    for r in rows:
        b = bidx.get((r["rep"], r["object"], r["threads"]))
        v, bv = _num(r.get("throughput_ops_per_s")), b and _num(b.get("throughput_ops_per_s"))
        r["ratio_vs_base"] = round(v / bv, 4) if r["completed"] and v is not None and bv else ""
    summary = summarise(rows, names, points)
    _runner.write_csv(os.path.join(d, "runs.csv"), rows, FIRST)
    _runner.write_csv(os.path.join(d, "summary.csv"), summary, ["object", "threads", "config"])
    meta = _runner.write_meta(d, env, args, {"experiment": "delegation", "configs": {n: {"algorithm": a, "env": e}
                                                                               for n, a, e in cfgs},
                                       "objects": objects, "threads": tlist, "duration_s": args.duration,
                                       "pause_max_cycles": args.pause, "server_cpu": args.server_cpu,
                                       "placement": args.placement, "baseline": base, "notes": notes,
                                       "runs": len(rows), "ncpus": os.cpu_count()})
    print_tables(rows, summary, names, objects, tlist, base, args, notes)
    if not args.no_plot:
        from . import _plots
        for obj in objects:
            series = []
            for n in names:
                ss = [s for s in summary if s["object"] == obj and s["config"] == n and
                      s["throughput_ops_per_s_median"] is not None]
                if ss:
                    series.append((n, [s["threads"] for s in ss], [s["throughput_ops_per_s_median"] / 1e6 for s in ss],
                                   [s["throughput_ops_per_s_min"] / 1e6 for s in ss],
                                   [s["throughput_ops_per_s_max"] / 1e6 for s in ss]))
            if series:
                f = _plots.lines_plot(series, f"delegation: {obj}, op + pause 0..{args.pause} cycles, "
                                      f"{os.cpu_count()} CPUs, {args.reps} runs of {args.duration:g} s per point "
                                      f"(medians, bars min-max)", "client threads", "Mops/s",
                                      os.path.join(d, f"delegation-{obj}.png"), logx=len(tlist) > 2,
                                      xticks=tlist)
                print(f"plot: {f}")
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"results: {d}/runs.csv, {d}/summary.csv, {d}/meta.json")
    return 0


def summarise(rows, names, points):
    out = []
    for obj, t in points:
        for n in names:
            rs = [r for r in rows if r["object"] == obj and r["threads"] == t and r["config"] == n]
            if not rs:
                continue
            ok = [r for r in rs if r["completed"]]
            s = {"object": obj, "threads": t, "config": n, "algorithm": rs[0]["algorithm"], "runs": len(rs),
                 "completed": len(ok), "probe_agree_runs": sum(1 for r in rs if r.get("probe_agree")),
                 "regimes": ";".join(sorted({str(r.get("regime")) for r in rs}))}
            for m in METRICS + ["probe_ns"]:
                vals = [_num(r.get(m)) for r in (ok if m != "probe_ns" else rs)]
                md, mn, mx = _runner.med_min_max([v for v in vals if v is not None])
                s[m + "_median"], s[m + "_min"], s[m + "_max"] = md, mn, mx
            out.append(s)
    return out


def _f(v, fmt="{:.3g}"):
    return "-" if v is None else fmt.format(v)


def print_tables(rows, summary, names, objects, tlist, base, args, notes):
    probes = [_num(r["probe_ns"]) for r in rows if _num(r.get("probe_ns"))]
    regimes = {}
    for r in rows:
        regimes[r["regime"]] = regimes.get(r["regime"], 0) + 1
    print()
    print(f"delegation on {os.cpu_count()} CPUs: op + pause 0..{args.pause} cycles, {args.duration:g} s per run, "
          f"{args.reps} interleaved rounds, server CPU {args.server_cpu}, clients {args.placement}, policy "
          f"{args.wait or 'each algorithm default'}")
    if probes:
        print(f"ping-pong probe (CPU0<->CPU1 round trip): median {statistics.median(probes):.0f} ns, min "
              f"{min(probes):.0f}, max {max(probes):.0f}; runs per regime: "
              + ", ".join(f"{k} {v}" for k, v in sorted(regimes.items())))
    for n in notes:
        print(f"note: {n}")
    for obj in objects:
        for t in tlist:
            print()
            print(f"{obj}, {t} client thread{'s' if t > 1 else ''}: medians [min-max] over completed runs; "
                  f"x{base} = median of per-round ratios")
            print(f"{'config':<18} {'done':>5} {'Mops/s [min-max]':>22} {'x' + base:>10} {'lat ns':>8} "
                  f"{'cyc/op':>8} {'max/min':>8} {'comb':>6} {'CAS/op':>7} {'srv cyc':>8}")
            for n in names:
                s = next((x for x in summary if x["object"] == obj and x["threads"] == t and x["config"] == n), None)
                if not s:
                    continue
                tp = s["throughput_ops_per_s_median"]
                rate = (f"{tp / 1e6:.3f} [{s['throughput_ops_per_s_min'] / 1e6:.3f}-"
                        f"{s['throughput_ops_per_s_max'] / 1e6:.3f}]") if tp is not None else "did not complete"
                print(f"{n:<18} {s['completed']:>2}/{s['runs']:<2} {rate:>22} {_f(s['ratio_vs_base_median']):>10} "
                      f"{_f(s['latency_ns_mean_median'], '{:.0f}'):>8} {_f(s['cycles_per_op_median'], '{:.0f}'):>8} "
                      f"{_f(s['fairness_max_min_median']):>8} {_f(s['combining_rate_median']):>6} "
                      f"{_f(s['cas_per_op_median']):>7} {_f(s['server_busy_cycles_per_op_median'], '{:.0f}'):>8}")
    print()
    print("lat ns: mean latency of one operation (client side, pause excluded); cyc/op: elapsed cycles / operations "
          "(when the object is saturated, the server's cycles per request); max/min: fairness (operations of the "
          "busiest thread / the least busy); comb: requests per combining pass (mp-server: per busy scan); "
          "srv cyc: mp-server's cycles per request inside its busy scans")
