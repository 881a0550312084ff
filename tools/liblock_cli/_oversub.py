"""`liblock bench oversubscription`: every algorithm with its default waiting
policy (or --wait) at 8 and 32 threads on this machine's CPUs, short critical
sections, interleaved rounds, each run bounded in time; throughput, the ratio
to posix in the same round, and for FIFO locks the cost of one hand-off
against the wake-up probe of the same run; and whether the oversubscription
targets (print_targets) are met.

One run is `lockbench --handoffs --wake-probe` (bench/lockbench.c,
bench/wakeprobe.h).  A round is one run of every algorithm at one thread
count, in an order rotated by one each round.

The ceiling series (on unless --no-ceiling): in every round, each non-FIFO
algorithm also runs with as many threads as CPUs and pure `spin` (where it
has it), against the baseline with its default policy in the same round.
Nothing is oversubscribed there, so its ratio is what the algorithm reaches
on this machine before oversubscription costs anything.  A miss is
attributed with the ceiling run's throughput against the baseline at the
missed thread count, round by round (`ceiling_at_t`): below 0.5 there, the
algorithm misses even without oversubscription (posix itself gets faster
with more threads than CPUs: its waiters sleep and the releaser takes the
lock back on its own CPU); at or above it, the miss is lost to
oversubscription.

The alternation bound: every run also takes the alternation probe
(bench/altprobe.h) before and after it, two threads on the two CPUs taking
strict turns at the run's critical section with a plain store as the
hand-over.  Its best batch (`alt_cs_per_s`) over the baseline's throughput
in the same round is the most that a lock handing over to a different
thread at every critical section can reach against the baseline here: a
hand-off to the other CPU costs at least one alternation, one to a thread of
the same CPU at least a context switch, which is slower still.  A lock that
does not delegate and hands over at a fraction h of its critical sections
is bounded by that ratio / h (`alt_bound_median`).  When a miss's bound is
below the target, the verdict says the target is out of reach on this
machine for a lock that hands over this way; the delegating locks' hand-off
counter counts changes of the requesting thread, not moves of the data, so
the bound is not applied to them.

The delegation bound: a lock that runs its clients' critical sections on a
dedicated server CPU (`server` in `liblock list`'s properties: rcl) also
takes the delegation probe (bench/rpcprobe.h) around each run: one client
sending each critical section to a server on the other CPU as a request and
a reply made of plain stores.  Its best batch (`rpc_cs_per_s`) times the
CPUs left to clients, over the baseline's throughput in the same round, is
`rpc_bound`: no such lock can exceed it here, since the clients of one CPU
run one at a time and each waits for its round trip.
"""
import math
import os
import statistics
import sys

from . import _runner
from ._lockexp import registry

FIRST = ["rep", "series", "threads", "algorithm", "wait", "fifo", "status", "check", "completed", "elapsed_s", "total_cs",
         "throughput_cs_per_s", "ratio_vs_baseline", "handoffs", "handoff_ns", "wake_ns", "wake_same_ns",
         "handoff_over_wake", "alt_cs_per_s", "alt_bound", "rpc_cs_per_s", "rpc_bound", "probe_before_ns", "probe_after_ns", "probe_ns", "probe_agree",
         "regime"]
FIFO_MAX_HANDOFF_OVER_WAKE = 2.0
NONFIFO_MIN_RATIO = 0.5


def add_arguments(sub, common):
    sp = sub.add_parser("oversubscription",
                        help="every algorithm, default policy, 8 and 32 threads: throughput vs posix, FIFO hand-off "
                             "vs the wake-up probe, the oversubscription targets")
    common(sp)
    for act in sp._actions:  # this experiment's own default and meaning
        if act.dest == "timeout":
            act.default, act.help = 5.0, "time bound of each run past its end, or its start with --count (s, default 5)"
        elif act.dest == "probe_tolerance":
            act.help = ("before/after probes differing by more than this factor mark the run probe_agree = 0 "
                        "(recorded; runs are not left out here, see docs/bench.md) (default 1.5)")
    sp.add_argument("--algorithms", "--locks", dest="algorithms", default="all",
                    help="comma-separated names, or 'all' (default)")
    sp.add_argument("--baseline", default="posix", help="ratios are against this algorithm (default posix)")
    sp.add_argument("--threads-list", default="8,32", help="thread counts (default 8,32)")
    sp.add_argument("--delay", type=int, default=100, help="busy delay between critical sections, cycles (default 100)")
    sp.add_argument("--lines", type=int, default=2, help="shared lines per critical section (default 2; the "
                    "hand-off counter adds one)")
    sp.add_argument("--duration", type=float, default=0.5, help="seconds per run (default 0.5)")
    sp.add_argument("--count", type=int, default=0, help="fixed-count mode: CSs per thread instead of --duration "
                    "(the run must then finish within --timeout of its start)")
    sp.add_argument("--wait", help="waiting policy for every algorithm that has it (default: each algorithm's own)")
    sp.add_argument("--pin", default="rr", choices=["rr", "none"], help="thread placement (default rr)")
    sp.add_argument("--no-ceiling", dest="ceiling", action="store_false",
                    help="skip the ceiling series (each non-FIFO algorithm with as many threads as CPUs and pure "
                         "spin, in every round; see docs/bench.md)")
    sp.add_argument("--wake-ref", default="cross", choices=["cross", "same"],
                    help="the wake-up probe FIFO hand-offs are compared with: cross (sleeper on the other, idle "
                         "CPU; default) or same (one CPU: wake-up plus a context switch)")


def _gmean_pos(*vals):
    v = [float(x) for x in vals if x not in (None, "") and float(x) > 0]
    return round(math.exp(sum(math.log(x) for x in v) / len(v)), 1) if v else ""


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def run(args, env):
    reg = {a["name"]: a for a in registry(env)}
    if args.algorithms in ("all", ""):
        algos = list(reg)
    else:
        algos = [x.strip() for x in args.algorithms.split(",") if x.strip()]
        bad = [a for a in algos if a not in reg]
        if bad:
            raise SystemExit(f"liblock bench: unknown algorithm(s): {', '.join(bad)} (see `liblock list`)")
    base = args.baseline
    if base not in algos and base in reg:
        algos.insert(0, base)  # ratios need the baseline in every round
    tlist = _runner.parse_list(args.threads_list, int, "--threads-list")
    if any(t < 1 for t in tlist):
        raise SystemExit("liblock bench: thread counts must be >= 1")
    if args.duration <= 0 and not args.count:
        raise SystemExit("liblock bench: --duration must be > 0")
    if args.delay < 0 or args.lines < 1:
        raise SystemExit("liblock bench: --delay must be >= 0 and --lines >= 1")
    if args.wait and not any(args.wait in reg[a]["policies"] for a in algos):
        raise SystemExit(f"liblock bench: no chosen algorithm has waiting policy '{args.wait}'")
    ncpus = os.cpu_count() or 1
    points = list(tlist) + (["ceiling"] if args.ceiling else [])
    order = [(rep, pt, a) for rep, pt, a in _runner.interleave(points, algos, args.reps)
             if pt != "ceiling" or a == base or "fifo" not in reg[a]["properties"]]
    d = _runner.out_dir(env, "oversubscription", args.out)
    per = f"{args.count} CSs/thread" if args.count else f"{args.duration:g} s"
    print(f"liblock bench oversubscription: {len(algos)} algorithms x threads {','.join(map(str, tlist))}"
          f"{f' (+ ceiling: {ncpus} threads, spin)' if args.ceiling else ''} x "
          f"{args.reps} rounds = {len(order)} runs of {per} (bound: {args.timeout:g} s past the "
          f"{'start' if args.count else 'end'}); {os.cpu_count()} CPUs; results in {d}", file=sys.stderr)
    load0 = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ""
    import datetime
    date0 = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    prog = _runner.Progress(len(order), args.quiet)
    rows = []
    lb = env.program("lockbench")
    for rep, pt, algo in order:
        info = reg[algo]
        series = "ceiling" if pt == "ceiling" else "oversub"
        t = ncpus if series == "ceiling" else pt
        # the baseline keeps its default policy: the reference is posix as a program gets it
        want = "spin" if series == "ceiling" else args.wait
        wait = want if want and want in info["policies"] and algo != base else None
        cmd = [lb, "-a", algo, "-t", str(t), "-d", str(args.delay), "-k", str(args.lines), "-T", str(args.timeout),
               "-p", args.pin, "--handoffs", "--wake-probe", "--alt-probe", "-l", f"rep{rep}", "-f", "json"]
        cmd += ["-n", str(args.count)] if args.count else ["-D", f"{args.duration:g}"]
        if "server" in info["properties"]:
            cmd += ["--rpc-probe"]
        if wait:
            cmd += ["-w", wait]
        outer = (args.timeout if args.count else args.duration + args.timeout) + 20
        rec = _runner.run_program(cmd, outer)[-1]
        rec["rep"], rec["threads"], rec["algorithm"], rec["series"] = rep, t, algo, series
        rec.setdefault("wait", wait or info.get("default_policy", ""))
        if want and not wait and algo != base:
            rec["wait_note"] = f"{want} not supported: default"
        rec["fifo"] = int("fifo" in info["properties"])
        rec["delegates"] = int("delegates" in info["properties"])
        alts = [v for v in (_num(rec.get("alt_before_mops")), _num(rec.get("alt_after_mops"))) if v and v > 0]
        rec["alt_cs_per_s"] = round(max(alts) * 1e6) if alts else ""
        rpcs = [v for v in (_num(rec.get("rpc_before_mops")), _num(rec.get("rpc_after_mops"))) if v and v > 0]
        rec["rpc_cs_per_s"] = round(max(rpcs) * 1e6 * max(1, ncpus - 1)) if rpcs else ""
        rec["completed"] = int(rec.get("status") == "ok" and rec.get("check") == "ok")
        rec["wake_ns"] = _gmean_pos(rec.get("wake_before_ns"), rec.get("wake_after_ns"))
        rec["wake_same_ns"] = _gmean_pos(rec.get("wake_same_before_ns"), rec.get("wake_same_after_ns"))
        ref = rec["wake_ns"] if args.wake_ref == "cross" else rec["wake_same_ns"]
        h = _num(rec.get("handoff_ns"))
        rec["handoff_over_wake"] = round(h / ref, 3) if rec["completed"] and h and ref else ""
        _runner.classify(rec, args.probe_tolerance, args.regime_bounds)
        rows.append(rec)
        st = rec.get("status")
        prog.step(f"{algo} T={t}{' ceiling' if series == 'ceiling' else ''} round {rep + 1}/{args.reps}"
                  + ("" if rec["completed"] else f" [{st}]"))
    # ratios within a round: the baseline's run of the same round, series and thread count
    bidx = {(r["rep"], r["series"], r["threads"]): r for r in rows if r["algorithm"] == base and r["completed"]}
    for r in rows:
        b = bidx.get((r["rep"], r["series"], r["threads"]))
        v, bv = _num(r.get("throughput_cs_per_s")), b and _num(b.get("throughput_cs_per_s"))
        r["ratio_vs_baseline"] = round(v / bv, 4) if r["completed"] and v is not None and bv else ""
        alt, ho, tot = _num(r.get("alt_cs_per_s")), _num(r.get("handoffs")), _num(r.get("total_cs"))
        r["alt_bound"] = (round(alt / bv / (ho / tot), 4) if r["completed"] and alt and bv and ho and tot
                          and not r["delegates"] else "")
        rpc = _num(r.get("rpc_cs_per_s"))
        r["rpc_bound"] = round(rpc / bv, 4) if r["completed"] and rpc and bv else ""
    summary = summarise([r for r in rows if r["series"] == "oversub"], algos, tlist, reg, base,
                        ceilings([r for r in rows if r["series"] == "ceiling"], algos),
                        [r for r in rows if r["series"] == "ceiling"])
    _runner.write_csv(os.path.join(d, "runs.csv"), rows, FIRST)
    _runner.write_csv(os.path.join(d, "summary.csv"), summary, ["threads", "algorithm"])
    meta = _runner.write_meta(d, env, args, {"experiment": "oversubscription", "algorithms": algos, "threads": tlist,
                                       "duration_s": args.duration, "count": args.count, "delay_cycles": args.delay,
                                       "lines": args.lines, "baseline": base, "wake_ref": args.wake_ref,
                                       "ceiling": bool(args.ceiling), "runs": len(rows), "ncpus": ncpus, "loadavg_start": load0, "date_utc_start": date0})
    print_tables(rows, summary, algos, tlist, base, args)
    verdicts = print_targets(summary, algos, tlist, base)
    meta["targets"] = verdicts
    import json
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    if not args.no_plot:
        from . import _plots
        f = _plots.oversub_plot(summary, algos, tlist, base, meta, os.path.join(d, "oversubscription.png"))
        if f:
            print(f"plot: {f}")
    print(f"results: {d}/runs.csv, {d}/summary.csv, {d}/meta.json")
    return 0


def _mmm(vals):
    return _runner.med_min_max([v for v in vals if v is not None])


def ceilings(rows, algos):
    """Per algorithm: the ceiling series' policy, runs, completed runs and
    median [min, max] ratio to the baseline (per-round ratios)."""
    out = {}
    for a in algos:
        rs = [r for r in rows if r["algorithm"] == a]
        if not rs:
            continue
        ok = [r for r in rs if r["completed"]]
        md, mn, mx = _mmm([_num(r.get("ratio_vs_baseline")) for r in ok])
        out[a] = {"ceiling_threads": rs[0]["threads"], "ceiling_wait": rs[0].get("wait", ""),
                  "ceiling_runs": len(rs), "ceiling_completed": len(ok), "ceiling_ratio_median": md,
                  "ceiling_ratio_min": mn, "ceiling_ratio_max": mx}
    return out


def ceiling_at_t(ceil_rows, rows, a, t, base):
    """Median over rounds of a's ceiling throughput (as many threads as
    CPUs, spin) over the baseline's throughput at t threads in the same
    round: what the algorithm reaches without oversubscription, against
    the number it must reach with it."""
    bt = {r["rep"]: _num(r.get("throughput_cs_per_s")) for r in rows
          if r["algorithm"] == base and r["threads"] == t and r["completed"]}
    v = [_num(r.get("throughput_cs_per_s")) / bt[r["rep"]] for r in ceil_rows
         if r["algorithm"] == a and r["completed"] and bt.get(r["rep"]) and _num(r.get("throughput_cs_per_s"))]
    return round(statistics.median(v), 4) if v else None


def summarise(rows, algos, tlist, reg, base, ceil=None, ceil_rows=None):
    out = []
    for t in tlist:
        for a in algos:
            rs = [r for r in rows if r["threads"] == t and r["algorithm"] == a]
            if not rs:
                continue
            ok = [r for r in rs if r["completed"]]
            s = {"threads": t, "algorithm": a, "wait": rs[0].get("wait", ""), "fifo": rs[0]["fifo"],
                 "delegates": rs[0].get("delegates", 0),
                 "runs": len(rs), "completed": len(ok),
                 "not_completed": ";".join(sorted({str(r.get("status")) + ("" if r.get("check") in ("ok", "skipped")
                                                                            else "/check " + str(r.get("check")))
                                                   for r in rs if not r["completed"]})),
                 "probe_agree_runs": sum(1 for r in rs if r.get("probe_agree"))}
            for m in ("throughput_cs_per_s", "ratio_vs_baseline", "handoff_ns", "wake_ns", "wake_same_ns",
                      "handoff_over_wake", "alt_cs_per_s", "alt_bound", "rpc_cs_per_s", "rpc_bound", "probe_ns"):
                md, mn, mx = _mmm([_num(r.get(m)) for r in ok] if m != "probe_ns" else [_num(r.get(m)) for r in rs])
                s[m + "_median"], s[m + "_min"], s[m + "_max"] = md, mn, mx
            hand = [_num(r.get("handoffs")) for r in ok]
            tot = [_num(r.get("total_cs")) for r in ok]
            s["handoffs_per_cs_median"] = (statistics.median([h / c for h, c in zip(hand, tot) if h is not None and c])
                                           if any(c for c in tot if c) else None)
            s.update((ceil or {}).get(a, {}))
            if ceil_rows and a != base and not s["fifo"]:
                s["ceiling_at_t_median"] = ceiling_at_t(ceil_rows, rows, a, t, base)
            s.update(target_of(s, base))
            out.append(s)
    return out


def target_of(s, base):
    """The oversubscription targets for one (threads, algorithm) summary."""
    if s["completed"] < s["runs"]:
        done = f"{s['runs'] - s['completed']} of {s['runs']} runs did not complete"
    else:
        done = ""
    if s["algorithm"] == base:
        return {"target": "baseline; every run completes", "meets": int(not done), "why": done}
    if s["fifo"]:
        tgt = f"hand-off <= {FIFO_MAX_HANDOFF_OVER_WAKE:g}x wake-up"
        v = s.get("handoff_over_wake_median")
        ok = v is not None and v <= FIFO_MAX_HANDOFF_OVER_WAKE
        why = "" if ok else ("no completed run with a wake-up probe" if v is None else f"hand-off {v:.3g}x wake-up")
    else:
        tgt = f">= {NONFIFO_MIN_RATIO:g}x {base} throughput"
        v = s.get("ratio_vs_baseline_median")
        ok = v is not None and v >= NONFIFO_MIN_RATIO
        why = "" if ok else ("no completed run in a round with the baseline" if v is None else f"{v:.3g}x {base}")
        c = s.get("ceiling_at_t_median")
        if why and v is not None and c is not None:
            cause = ("below the target without oversubscription too" if c < NONFIFO_MIN_RATIO
                     else "lost to oversubscription")
            why += (f" (with {s.get('ceiling_threads', '?')} threads and spin it reaches {c:.3g}x {base} at "
                    f"{s['threads']} threads: {cause})")
        ab, h = s.get("alt_bound_median"), s.get("handoffs_per_cs_median")
        if why and v is not None and ab is not None and h is not None:
            if ab < NONFIFO_MIN_RATIO:
                why += (f"; out of reach here: it hands over at {h:.2f} of its critical sections, and the "
                        f"alternation bound for that is {ab:.3g}x {base}")
            else:
                why += f"; the alternation bound ({ab:.3g}x {base} at {h:.2f} hand-offs per CS) allows the target"
        rb = s.get("rpc_bound_median")
        if why and v is not None and rb is not None:
            if rb < NONFIFO_MIN_RATIO:
                why += (f"; out of reach here: a dedicated server and the CPUs left to its clients run at most "
                        f"{rb:.3g}x {base} (the delegation bound)")
            else:
                why += f"; the delegation bound ({rb:.3g}x {base}) allows the target"
    if not s["completed"]:
        why = ""  # nothing to compare: "did not complete" says it
    whys = "; ".join(x for x in (done, why) if x)
    # unknown (meets = ""): every run completed but nothing to compare with (no wake-up probe could be
    # taken - the other CPU was held - or no baseline run completed in the same rounds)
    meets = "" if v is None and not done else int(ok and not done)
    if meets == "":
        whys = "unknown: " + ("no wake-up probe in its runs (the CPU was held)" if s["fifo"]
                              else "no baseline run completed in its rounds")
    return {"target": tgt + "; every run completes", "meets": meets, "why": whys}


def _bound(s):
    """The bound that applies to a summary row: alternation, or delegation for a server lock."""
    return s.get("alt_bound_median") if s.get("alt_bound_median") is not None else s.get("rpc_bound_median")


def _fmt_rate(v):
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}"


def _fmt_ratio(v):
    if v is None:
        return "-"
    return f"{v:.3g}x" if v < 100 else f"{v:.0f}x"


def _fmt_ns(v):
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f}ms"
    if v >= 1e3:
        return f"{v / 1e3:.1f}us"
    return f"{v:.0f}ns"


def print_tables(rows, summary, algos, tlist, base, args):
    print()
    probes = [_num(r["probe_ns"]) for r in rows if _num(r.get("probe_ns"))]
    regimes = {}
    for r in rows:
        regimes[r["regime"]] = regimes.get(r["regime"], 0) + 1
    ncpu = os.cpu_count()
    mode = f"{args.count} CSs per thread" if args.count else f"{args.duration:g} s per run"
    print(f"oversubscription on {ncpu} CPUs: delay {args.delay} cycles, {args.lines} shared lines (+1 hand-off counter),"
          f" {mode}, {args.reps} interleaved rounds, pin {args.pin}, policy "
          f"{'--wait ' + args.wait if args.wait else 'each algorithm default'}")
    if probes:
        print(f"ping-pong probe (CPU0<->CPU1 round trip): median {statistics.median(probes):.0f} ns, "
              f"min {min(probes):.0f}, max {max(probes):.0f}; runs per regime: "
              + ", ".join(f"{k} {v}" for k, v in sorted(regimes.items())))
    for t in tlist:
        sel = {s["algorithm"]: s for s in summary if s["threads"] == t}
        wk = [_num(r["wake_ns"]) for r in rows if r["threads"] == t and _num(r.get("wake_ns"))]
        ws = [_num(r["wake_same_ns"]) for r in rows if r["threads"] == t and _num(r.get("wake_same_ns"))]
        print()
        print(f"T = {t} threads: wake-up probe, median of the runs' probes: other CPU {_fmt_ns(statistics.median(wk)) if wk else '-'}"
              f" [{_fmt_ns(min(wk)) if wk else '-'}-{_fmt_ns(max(wk)) if wk else '-'}], same CPU "
              f"{_fmt_ns(statistics.median(ws)) if ws else '-'}; ratios are medians of per-round ratios")
        print(f"{'algorithm':<15} {'policy':<15} {'fifo':<4} {'done':>5} {'CS/s median [min-max]':>27} "
              f"{'x ' + base:>9} {'ceiling':>8} {'bound':>8} {'hand-off':>9} {'wake':>8} {'ho/wake':>8} {'wake1cpu':>8}  target")
        for a in algos:
            s = sel.get(a)
            if not s:
                continue
            rate = (f"{_fmt_rate(s['throughput_cs_per_s_median'])} [{_fmt_rate(s['throughput_cs_per_s_min'])}-"
                    f"{_fmt_rate(s['throughput_cs_per_s_max'])}]") if s["completed"] else "did not complete"
            ratio = s["ratio_vs_baseline_median"]
            how = s["handoff_over_wake_median"]
            verdict = "meets" if s["meets"] == 1 else ("UNKNOWN" if s["meets"] == "" else "MISSES") + ": " + s["why"]
            print(f"{a:<15} {str(s['wait']):<15} {'yes' if s['fifo'] else 'no':<4} {s['completed']:>2}/{s['runs']:<2} "
                  f"{rate:>27} {_fmt_ratio(ratio):>9} {_fmt_ratio(s.get('ceiling_ratio_median')):>8} "
                  f"{_fmt_ratio(_bound(s)):>8} "
                  f"{_fmt_ns(s['handoff_ns_median']):>9} "
                  f"{_fmt_ns(s['wake_ns_median'] if args.wake_ref == 'cross' else s['wake_same_ns_median']):>8} "
                  f"{_fmt_ratio(how):>8} {_fmt_ns(s['wake_same_ns_median'] if args.wake_ref == 'cross' else s['wake_ns_median']):>8}"
                  f"  {verdict if a != base else 'baseline'}")
    print()
    print("done: runs completed within the bound (a run that hit it is 'did not complete'); hand-off = elapsed time /"
          " number of times the critical section ran for a different thread than the previous one; wake = the "
          f"wake-up probe ({'other' if args.wake_ref == 'cross' else 'same'} CPU) of the same runs; ho/wake: median of"
          f" per-run ratios; wake1cpu: the {'same' if args.wake_ref == 'cross' else 'other'}-CPU wake-up, for reference;"
          f" ceiling: x {base} with {os.cpu_count()} threads and pure spin (no oversubscription), same rounds"
          f"{'' if args.ceiling else ' (not run: --no-ceiling)'}; bound: the most a lock handing over at the"
          f" algorithm's measured rate can reach, x {base} (the alternation probe of the same runs, bench/altprobe.h;"
          f" not for delegating locks), or for a lock with a dedicated server the delegation bound"
          f" (bench/rpcprobe.h).")


def print_targets(summary, algos, tlist, base):
    print()
    print(f"oversubscription targets (FIFO: hand-off <= {FIFO_MAX_HANDOFF_OVER_WAKE:g}x wake-up; others: >= "
          f"{NONFIFO_MIN_RATIO:g}x {base}; all: every run completes), at threads {', '.join(map(str, tlist))}:")
    verdicts = {}
    for a in algos:
        ss = [s for s in summary if s["algorithm"] == a]
        if a == base:
            continue
        bad = [f"T={s['threads']}: {s['why']}" for s in ss if s["meets"] == 0]
        unk = [f"T={s['threads']}: {s['why']}" for s in ss if s["meets"] == ""]
        v = "misses: " + " | ".join(bad + unk) if bad else "unknown: " + " | ".join(unk) if unk else "meets"
        verdicts[a] = v
        print(f"  {a:<15} " + ("MISSES  " + " | ".join(bad + unk) if bad else "UNKNOWN " + " | ".join(unk) if unk
                               else "meets"))
    n_ok = sum(1 for v in verdicts.values() if v == "meets")
    print(f"  {n_ok} of {len(verdicts)} algorithms meet the targets")
    return verdicts
