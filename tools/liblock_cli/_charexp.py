"""Machine-characterisation experiments of `liblock bench`: J.-P. Lozi,
"Improving the Performance of Java Applications on Multicore Architectures",
internship report, LIP6, 2010, sections 3.1-3.4, and J.-P. Lozi, "Towards
More Scalable Mutual Exclusion for Multicore Architectures", PhD thesis,
UPMC (Paris 6), 2014, section 2.5: latency-map, store-cas, null-rpc, multi-rpc,
cost-model."""
import math
import os
import sys

from . import _runner

SIZE_UNITS = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def _size_label(b):
    b = int(b)
    for u, f in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if b >= f and b % f == 0:
            return f"{b // f}{u}"
    return str(b)


def _run_and_classify(args, cmd, outer, extra=None):
    recs = _runner.run_program(cmd, outer)
    for r in recs:
        r.update(extra or {})
        _runner.classify(r, args.probe_tolerance, args.regime_bounds)
    return recs


def _finish(args, env, d, exp, rows, summary, extra_meta=None, first=()):
    _runner.write_csv(os.path.join(d, "runs.csv"), rows, first)
    if summary is not None:
        _runner.write_csv(os.path.join(d, "summary.csv"), summary)
    meta = dict(experiment=exp, runs=len(rows))
    meta.update(extra_meta or {})
    return _runner.write_meta(d, env, args, meta)


def _probe_line(rows):
    probes = [r["probe_ns"] for r in rows if r.get("probe_ns") not in ("", None)]
    if not probes:
        return "probe: none (one CPU or probes off)"
    reg = {}
    for r in rows:
        reg[r["regime"]] = reg.get(r["regime"], 0) + 1
    return (f"probe (CPU0<->CPU1 round trip, ns): min {min(probes):.0f}, median {sorted(probes)[len(probes) // 2]:.0f}, "
            f"max {max(probes):.0f}; records per regime: " + ", ".join(f"{k} {v}" for k, v in sorted(reg.items())))


# ---------------------------------------------------------------- latency-map
def latency_map(args, env, d):
    cmd = [env.program("latmap"), "-r", str(args.reps), "-s", args.sizes]
    if args.cpus:
        cmd += ["-c", args.cpus]
    print(f"liblock bench latency-map: sizes {args.sizes}, {args.reps} reps; results in {d}", file=sys.stderr)
    rows = _run_and_classify(args, cmd, 3600)
    if rows and rows[0].get("status") in ("error", "timeout"):
        print(f"liblock bench: latmap failed: {rows[0].get('error')}", file=sys.stderr)
        return 1
    meta = _finish(args, env, d, "latency-map", rows, None)
    sizes = sorted({int(r["size_bytes"]) for r in rows})
    pairs = sorted({(int(r["owner_cpu"]), int(r["reader_cpu"])) for r in rows})
    idx = {(int(r["size_bytes"]), int(r["owner_cpu"]), int(r["reader_cpu"])): r for r in rows}
    print(_probe_line(rows))
    print(f"caches of CPU 0: {rows[0].get('caches', '?')}")
    print("ns per line read (median of reps), by where the line was last written:")
    print(f"{'written on -> read on':<24}" + "".join(f"{_size_label(s):>10}" for s in sizes))
    matrix, labels = [], []
    for o, rd in pairs:
        lab = f"CPU{o} -> CPU{rd}" + (" (local)" if o == rd else "")
        labels.append(lab)
        vals = [float(idx[(s, o, rd)]["ns_per_line"]) if (s, o, rd) in idx else None for s in sizes]
        matrix.append(vals)
        print(f"{lab:<24}" + "".join(f"{v:>10.1f}" if v is not None else f"{'-':>10}" for v in vals))
    disagree = [r for r in rows if not r.get("probe_agree")]
    if disagree:
        print(f"{len(disagree)} record(s) had disagreeing probes (marked in runs.csv).")
    if not args.no_plot:
        from . import _plots
        f = _plots.heatmap(matrix, labels, [_size_label(s) for s in sizes],
                           f"latency map: ns per dependent read, by where the line was written\n"
                           f"{meta['date_utc'][:16]} UTC, caches {rows[0].get('caches', '?')}",
                           "ns per line (log scale)", os.path.join(d, "latency-map.png"), fmt="{:.1f}", log=True,
                           xlabel="working set", ylabel="written on -> read on")
        print(f"plot: {f}")
    print(f"results: {d}/runs.csv")
    return 0


# ------------------------------------------------------------------ store-cas
def store_cas(args, env, d):
    cmd = [env.program("storecas"), "-r", str(args.reps)]
    if args.threads_list:
        cmd += ["-t", args.threads_list]
    print(f"liblock bench store-cas: {args.reps} reps; results in {d}", file=sys.stderr)
    if args.reps > 101:
        print("liblock bench: store-cas takes at most 101 reps", file=sys.stderr)
        return 2
    rows = _run_and_classify(args, cmd, 3600)
    if rows and rows[0].get("status") in ("error", "timeout"):
        print(f"liblock bench: storecas failed: {rows[0].get('error')}", file=sys.stderr)
        return 1
    meta = _finish(args, env, d, "store-cas", rows, None)
    print(_probe_line(rows))
    ovh = sorted(float(r["timer_overhead_cycles"]) for r in rows if r.get("timer_overhead_cycles") not in ("", None))
    if ovh:
        print(f"every operation timed alone (lfence/rdtsc ... rdtscp/lfence); timer overhead, measured in each run "
              f"and subtracted: {ovh[0]:.0f}-{ovh[-1]:.0f} cycles")
    print("cycles per operation on one shared line, monitored thread on CPU 0, contenders storing random values:")
    print("median of reps [min-max of the reps' medians]; p10, p90, p99, mean (values up to p99; resolves below one "
          "clock tick): each the median over reps")
    print(f"{'threads':>8} {'op':<12} {'median [min-max]':>18} {'p10':>6} {'p90':>6} {'p99':>6} {'mean':>7}"
          f" {'med ns':>7} {'mean ns':>8}")
    ts = sorted({int(r["threads"]) for r in rows})
    get = {(int(r["threads"]), r["op"]): r for r in rows}
    for t in ts:
        for op in ("store", "store-fence", "cas"):
            r = get.get((t, op))
            if not r:
                continue
            over = " (oversubscribed)" if r.get("oversubscribed") else ""
            med = f"{float(r['cycles_per_op']):.0f} [{float(r['cycles_per_op_min']):.0f}-{float(r['cycles_per_op_max']):.0f}]"
            print(f"{t:>8} {op:<12} {med:>18} {float(r.get('cycles_per_op_p10') or 0):>6.0f} "
                  f"{float(r['cycles_per_op_p90']):>6.0f} {float(r.get('cycles_per_op_p99') or 0):>6.0f} "
                  f"{float(r.get('cycles_per_op_mean') or 0):>7.1f} {float(r['ns_per_op']):>7.1f} "
                  f"{float(r.get('ns_per_op_mean') or 0):>8.1f}{over}")
    if not args.no_plot:
        from . import _plots
        series = []
        for op in ("store", "store-fence", "cas"):
            pts = sorted((int(r["threads"]), r) for r in rows if r["op"] == op)
            if pts:  # trimmed mean (not quantised by the clock tick), bars from p10 to p90
                series.append((f"{op.upper() if op == 'cas' else op} (mean, bars p10-p90)", [p[0] for p in pts],
                               [float(p[1].get("cycles_per_op_mean") or p[1]["cycles_per_op"]) for p in pts],
                               [float(p[1].get("cycles_per_op_p10") or p[1]["cycles_per_op_min"]) for p in pts],
                               [float(p[1]["cycles_per_op_p90"]) for p in pts]))
        f = _plots.lines_plot(series, f"store / CAS on one shared line vs threads writing it, every op timed alone\n"
                              f"{meta['date_utc'][:16]} UTC, {rows[0].get('ncpus')} CPUs (beyond: oversubscribed)",
                              "threads (monitored + contenders)", "cycles per operation (timer overhead subtracted)",
                              os.path.join(d, "store-cas.png"), logx=True,
                              xticks=sorted({int(r["threads"]) for r in rows}))
        print(f"plot: {f}")
    print(f"results: {d}/runs.csv")
    return 0


# ------------------------------------------------------------------- null-rpc
def null_rpc(args, env, d):
    print(f"liblock bench null-rpc: {args.reps} processes x 3 interleaved pairs; results in {d}", file=sys.stderr)
    prog = _runner.Progress(args.reps, args.quiet)
    rows = []
    for rep in range(args.reps):
        rows += _run_and_classify(args, [env.program("nullrpc"), "-r", "3"], 600, {"rep": rep})
        prog.step(f"rep {rep + 1}/{args.reps}")
    if rows and rows[0].get("status") in ("error", "timeout"):
        print(f"liblock bench: nullrpc failed: {rows[0].get('error')}", file=sys.stderr)
        return 1
    summary = _runner.summarise(rows, ["layout"], ["cycles_per_rpc", "ns_per_rpc"])
    meta = _finish(args, env, d, "null-rpc", rows, summary)
    print(_probe_line(rows))
    print("null RPC round trip between two pinned CPUs (median of processes [min-max]), by probe regime:")
    for s in sorted((s for s in summary if s.get("n")), key=lambda s: (s["regime"], s["layout"])):
        print(f"  {s['regime']:<7} {s['layout']:<15} n={s['n']}  {s['cycles_per_rpc_median']:.0f} cycles "
              f"[{s['cycles_per_rpc_min']:.0f}-{s['cycles_per_rpc_max']:.0f}]  = {s['ns_per_rpc_median']:.0f} ns"
              + (f"  (probe {s['probe_ns_median']:.0f} ns)" if s.get("probe_ns_median") is not None else "  (no probe)"))
    dom = _runner.dominant_regime(rows)
    same = next((s for s in summary if s.get("regime") == dom and s.get("layout") == "same-line" and s.get("n")), None)
    sep = next((s for s in summary if s.get("regime") == dom and s.get("layout") == "separate-lines" and s.get("n")), None)
    if same and sep:
        print(f"in the '{dom}' regime: separate lines cost {sep['cycles_per_rpc_median'] / same['cycles_per_rpc_median']:.2f}x "
              f"a single line (the 2010 internship report, on its 8-core Xeon 'bossa': ~1.8x same die, ~1.2-1.3x across dies/packages)")
    plt = None
    if not args.no_plot and dom:
        from . import _plots
        plt = _plots._plt()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        regs = sorted({s["regime"] for s in summary if s.get("n")})
        for j, lay in enumerate(("same-line", "separate-lines")):
            ys = []
            for rg in regs:
                s = next((s for s in summary if s.get("regime") == rg and s.get("layout") == lay and s.get("n")), None)
                ys.append(s["ns_per_rpc_median"] if s else 0)
            ax.bar([i + (j - 0.5) * 0.38 for i in range(len(regs))], ys, 0.38, label=lay)
        ax.set_xticks(range(len(regs)))
        ax.set_xticklabels([f"regime '{rg}'" for rg in regs])
        ax.set_ylabel("ns per null RPC round trip (median)")
        ax.legend()
        ax.set_title(f"null RPC: flags in one line vs two lines\n{meta['date_utc'][:16]} UTC", fontsize=9)
        fig.tight_layout()
        f = os.path.join(d, "null-rpc.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        print(f"plot: {f}")
    print(f"results: {d}/runs.csv, {d}/summary.csv")
    return 0


# ------------------------------------------------------------------ multi-rpc
def multi_rpc(args, env, d):
    ncpu = os.cpu_count() or 1
    clients = args.clients or max(1, ncpu - 1)
    delays = _runner.parse_list(args.delays, int, "--delays")
    order = _runner.interleave([(dl,) for dl in delays], ["tas", "ttas"], args.reps)
    print(f"liblock bench multi-rpc: {clients} client(s) + 1 server, {len(order)} runs; results in {d}", file=sys.stderr)
    if clients > max(1, ncpu - 1):
        print(f"note: {clients} clients on {ncpu - 1} client CPU(s): clients share CPUs (oversubscribed)", file=sys.stderr)
    prog = _runner.Progress(len(order), args.quiet)
    rows = []
    for rep, (dl,), claim in order:
        cmd = [env.program("rpcbench"), "-m", "rpc", "-c", str(clients), "-d", str(dl), "-D", "0.2",
               "-T", str(args.timeout)] + (["--ttas"] if claim == "ttas" else [])
        rows += _run_and_classify(args, cmd, args.timeout + 15, {"rep": rep, "claim": claim, "delay_cycles": dl})
        prog.step(f"{claim} delay {dl} rep {rep + 1}/{args.reps}")
    for r in rows:
        r["algorithm"] = r.get("claim")
    summary = _runner.summarise(rows, ["delay_cycles"], ["throughput_cs_per_s", "fairness_jain", "cycles_per_cs",
                                                  "per_client_min", "per_client_max"])
    meta = _finish(args, env, d, "multi-rpc", rows, summary, {"clients": clients})
    dom = _runner.dominant_regime(rows)
    print(_probe_line(rows))
    if dom is None:
        print("no usable run")
        return 1
    print(f"{clients} client(s), one server slot claimed by CAS; medians of the '{dom}' regime:")
    print(f"{'delay':>8} {'TAS CS/s':>12} {'TAS fair':>9} {'TTAS CS/s':>12} {'TTAS fair':>9}")
    get = {(s["delay_cycles"], s["algorithm"]): s for s in summary if s.get("regime") == dom and s.get("n")}
    for dl in delays:
        cells = []
        for c in ("tas", "ttas"):
            s = get.get((dl, c))
            cells += [f"{s['throughput_cs_per_s_median']:.3g}" if s else "-",
                      f"{s['fairness_jain_median']:.3f}" if s else "-"]
        print(f"{dl:>8} {cells[0]:>12} {cells[1]:>9} {cells[2]:>12} {cells[3]:>9}")
    for c in ("tas", "ttas"):
        pts = [(dl, get[(dl, c)]) for dl in delays if (dl, c) in get]
        if pts:
            best = max(pts, key=lambda p: p[1]["throughput_cs_per_s_median"])
            fair = next((dl for dl, s in pts if s["fairness_jain_median"] >= 0.95), None)
            print(f"{c.upper()}: peak {best[1]['throughput_cs_per_s_median']:.3g} CS/s at delay {best[0]} cycles; "
                  f"smallest delay with Jain fairness >= 0.95: {fair if fair is not None else 'none'}")
    if clients == 1:
        print("(one client: fairness is trivially 1; the TAS/TTAS fairness trade-off needs >= 3 CPUs or --clients > 1)")
    if not args.no_plot:
        from . import _plots
        series, twin = [], []
        for c in ("tas", "ttas"):
            pts = [(dl, get[(dl, c)]) for dl in delays if (dl, c) in get]
            if pts:
                series.append((f"{c.upper()} throughput", [p[0] for p in pts],
                               [p[1]["throughput_cs_per_s_median"] for p in pts],
                               [p[1]["throughput_cs_per_s_min"] for p in pts],
                               [p[1]["throughput_cs_per_s_max"] for p in pts]))
                twin.append((f"{c.upper()} fairness", [p[0] for p in pts], [p[1]["fairness_jain_median"] for p in pts]))
        f = _plots.lines_plot(series, f"multi-client RPC, {clients} client(s), one slot: throughput and fairness vs "
                              f"client delay\n{meta['date_utc'][:16]} UTC, regime '{dom}'",
                              "client delay after each RPC (cycles)", "RPCs per second", os.path.join(d, "multi-rpc.png"),
                              logx=True, twin=("Jain fairness index", twin))
        print(f"plot: {f}")
    print(f"results: {d}/runs.csv, {d}/summary.csv")
    return 0


# ----------------------------------------------------------------- cost-model
COST_BUDGET_S = 100.0   # whole default experiment, worst case (every extension taken)
COST_RUN_OVERHEAD_S = 0.05  # per rpcbench process: start, two probes, chains
COST_EXTENSIONS = 3     # extra shared counts (doubling) for a context row with no break-even


def _cost_analyse(rows, shared_all, context):
    """Peaks, grid and per-context break-even from the runs so far."""
    summary = _runner.summarise(rows, ["shared_lines", "context_lines", "delay_cycles"], ["throughput_cs_per_s"])
    dom = _runner.dominant_regime(rows)
    # peak over the delay sweep (the internship report's metric), per mode, in the dominant regime
    peak = {}
    for srow in summary:
        if srow.get("regime") != dom or not srow.get("n"):
            continue
        k = (srow["shared_lines"], srow["context_lines"], srow["algorithm"])
        if srow["throughput_cs_per_s_median"] > peak.get(k, (0,))[0]:
            peak[k] = (srow["throughput_cs_per_s_median"], srow["delay_cycles"])
    grid = []
    for c in context:
        for s in shared_all:
            a, b = peak.get((s, c, "lock")), peak.get((s, c, "rpc"))
            if not (a or b):
                continue
            grid.append(dict(shared_lines=s, context_lines=c, lock_peak=a[0] if a else "",
                             lock_peak_delay=a[1] if a else "", rpc_peak=b[0] if b else "",
                             rpc_peak_delay=b[1] if b else "", rpc_over_lock=round(b[0] / a[0], 3) if a and b else ""))
    # break-even: per context count, the shared count from which delegation
    # wins at every larger measured point (interpolated on log(ratio)
    # between the last losing and the first winning point); a single noisy
    # winning point followed by losing ones is not a break-even
    breakeven = []
    for c in context:
        pts = sorted((g["shared_lines"], g["rpc_over_lock"]) for g in grid
                     if g["context_lines"] == c and g["rpc_over_lock"] != "")
        be = None
        k = len(pts)
        while k > 0 and pts[k - 1][1] >= 1:
            k -= 1
        if k < len(pts):  # pts[k:] all win
            if k == 0:
                be = pts[0][0]
            else:
                (s0, r0), (s1, r1) = pts[k - 1], pts[k]
                be = s0 + (s1 - s0) * (math.log(r0) / (math.log(r0) - math.log(r1)))
        breakeven.append((c, be))
    return summary, dom, grid, breakeven


def cost_model(args, env, d):
    ncpu = os.cpu_count() or 1
    shared = _runner.parse_list(args.shared, int, "--shared")
    context = _runner.parse_list(args.context, int, "--context")
    delays = _runner.parse_list(args.delays, int, "--delays")
    # The whole grid is measured; a context row where delegation wins
    # nowhere gets up to COST_EXTENSIONS more shared counts (doubling the
    # largest), so that the break-even can be found on a machine where it
    # lies beyond the given grid.  Each run's length is set so that even
    # the worst case (every extension) stays within COST_BUDGET_S.
    base = len(shared) * len(context) * len(delays) * 2 * args.reps
    worst = base + COST_EXTENSIONS * len(context) * len(delays) * 2 * args.reps
    dur = min(0.1, max(0.01, (COST_BUDGET_S - worst * COST_RUN_OVERHEAD_S) / worst))
    print(f"liblock bench cost-model: {len(shared)}x{len(context)} grid x {len(delays)} delays x 2 modes x "
          f"{args.reps} reps = {base} runs of {dur * 1e3:.0f} ms (+ up to {worst - base} for extensions); "
          f"results in {d}", file=sys.stderr)
    rows = []

    def measure(points):
        order = _runner.interleave(points, ["lock", "rpc"], args.reps)
        prog = _runner.Progress(len(order), args.quiet)
        for rep, (s, c, dl), mode in order:
            cmd = [env.program("rpcbench"), "-m", mode, "-S", str(s), "-C", str(c), "-d", str(dl), "-D", f"{dur:.3f}",
                   "-T", str(args.timeout)]
            for r in _run_and_classify(args, cmd, args.timeout + 15, {"rep": rep}):
                r["algorithm"] = r.get("mode")
                rows.append(r)
            prog.step(f"{mode} S={s} C={c} d={dl} rep {rep + 1}/{args.reps}")

    measure([(s, c, dl) for c in context for s in shared for dl in delays])
    shared_all = list(shared)
    extended = {}
    for _ in range(COST_EXTENSIONS):
        summary, dom, grid, breakeven = _cost_analyse(rows, shared_all, context)
        # rows with no break-even; each row extends from its own largest measured count
        todo = []
        for c, be in breakeven:
            if be is None and shared_all:
                top = max([s for s in shared] + extended.get(c, []))
                nxt = 2 * top if top > 0 else 10
                extended.setdefault(c, []).append(nxt)
                todo.append((nxt, c))
        if not todo:
            break
        print(f"liblock bench cost-model: no break-even yet for context "
              f"{', '.join(str(c) for _, c in todo)}: extending to shared {', '.join(str(s) for s, _ in todo)}",
              file=sys.stderr)
        for s, _ in todo:
            if s not in shared_all:
                shared_all.append(s)
        measure([(s, c, dl) for s, c in todo for dl in delays])
    shared_all.sort()
    summary, dom, grid, breakeven = _cost_analyse(rows, shared_all, context)
    _runner.write_csv(os.path.join(d, "grid.csv"), grid)
    found = [(c, s) for c, s in breakeven if s is not None]
    fit = None
    if len(found) >= 2:  # least squares: n_shared = a * n_context + b
        n = len(found)
        mx = sum(c for c, _ in found) / n
        my = sum(s for _, s in found) / n
        sxx = sum((c - mx) ** 2 for c, _ in found)
        if sxx > 0:
            a = sum((c - mx) * (s - my) for c, s in found) / sxx
            fit = (a, my - a * mx)
    shared = shared_all
    meta = _finish(args, env, d, "cost-model", rows, summary,
                   {"dominant_regime": dom, "breakeven": breakeven, "fit": fit,
                    "convention": f"lock: {ncpu} threads on {ncpu} CPUs; rpc: 1 server CPU + {max(1, ncpu - 1)} client(s)",
                    "run_duration_s": dur, "shared_measured": shared_all,
                    "extended": {str(k): v for k, v in extended.items()}})
    print(_probe_line(rows))
    if dom is None:
        print("no usable run")
        return 1
    print(f"peak throughput over delays {delays} (median of reps, regime '{dom}'): delegation / local locking")
    print(f"(local: {ncpu} threads with a CAS spinlock; delegation: 1 server + {max(1, ncpu - 1)} client(s); >1 = delegation wins)")
    head = "ctx \\ shared"
    print(f"{head:>12}" + "".join(f"{s:>8}" for s in shared))
    gi = {(g["shared_lines"], g["context_lines"]): g for g in grid}
    for c in context:
        print(f"{c:>12}" + "".join(f"{gi[(s, c)]['rpc_over_lock']:>8.2f}"
                                   if (s, c) in gi and gi[(s, c)]["rpc_over_lock"] != ""
                                   else f"{'-':>8}" for s in shared))
    for c, s in breakeven:
        print(f"  context {c:>3}: break-even at {'%.1f shared lines' % s if s is not None else 'none in the grid'}")
    if fit:
        print(f"fitted break-even line (least squares over {len(found)} context counts): "
              f"n_shared = {fit[0]:.2f} * n_context + {fit[1]:.1f}"
              f"   (the 2010 internship report, on its 8-core machine: n_shared > 2 * n_context + 15)")
    else:
        print(f"no break-even line: delegation won from some shared count at {len(found)} context count(s), "
              f"a line needs 2 (the 2010 internship report, on its 8-core machine: n_shared > 2 * n_context + 15)")
    print(f"(each run {dur * 1e3:.0f} ms; '-': not measured; rows without a break-even were extended by doubling "
          f"the shared count up to {COST_EXTENSIONS} times)")
    plt = None
    if not args.no_plot:
        from . import _plots
        plt = _plots._plt()
    if plt is not None:
        from matplotlib.colors import LogNorm, TwoSlopeNorm
        fig, ax = plt.subplots(figsize=(7.5, 5))
        xs = [g["context_lines"] for g in grid if g["rpc_over_lock"] != ""]
        ys = [g["shared_lines"] for g in grid if g["rpc_over_lock"] != ""]
        vs = [g["rpc_over_lock"] for g in grid if g["rpc_over_lock"] != ""]
        if vs:
            lo, hi = min(vs + [0.99]), max(vs + [1.01])
            sc = ax.scatter(xs, ys, c=[math.log10(v) for v in vs], cmap="RdBu", s=420, marker="s",
                            norm=TwoSlopeNorm(vcenter=0, vmin=math.log10(lo), vmax=math.log10(hi)))
            span = max(abs(math.log10(lo)), abs(math.log10(hi)))
            for x, y, v in zip(xs, ys, vs):  # white text on the dark (far from 1) cells
                dark = span > 0 and abs(math.log10(v)) > 0.6 * span
                ax.text(x, y, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
            cb = fig.colorbar(sc, ax=ax)
            cb.set_label("log10(delegation / local peak throughput)  (blue: delegation wins)")
        cx = [c for c, _ in found]
        if found:
            ax.plot(cx, [s for _, s in found], "k^", label="measured break-even")
        xr = [min(context), max(context)]
        if fit:
            ax.plot(xr, [fit[0] * x + fit[1] for x in xr], "k-", label=f"fit: {fit[0]:.2f}·ctx + {fit[1]:.1f}")
        ax.plot(xr, [2 * x + 15 for x in xr], "k--", alpha=0.6, label="Lozi 2010: 2·ctx + 15")
        ax.set_xlabel("context lines per client (n_context)")
        ax.set_ylabel("shared lines per critical section (n_shared)")
        ax.set_ylim(min(shared) - 5, max(shared) + 10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)  # off the cells
        ax.set_title(f"cost model: local locking vs delegation, peak over client delay\n"
                     f"{meta['date_utc'][:16]} UTC, regime '{dom}', {meta['convention']}", fontsize=8)
        fig.tight_layout()
        f = os.path.join(d, "cost-model.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        print(f"plot: {f}")
    print(f"results: {d}/runs.csv, {d}/summary.csv, {d}/grid.csv")
    return 0


def run(args, env):
    d = _runner.out_dir(env, args.experiment, args.out)
    fn = {"latency-map": latency_map, "store-cas": store_cas, "null-rpc": null_rpc, "multi-rpc": multi_rpc,
          "cost-model": cost_model}[args.experiment]
    return fn(args, env, d)
