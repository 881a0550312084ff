"""`liblock bench manycore`: on a machine with many CPUs, in one command and
a fixed time budget (8 minutes by default), the two figures that show what
Remote Core Locking is for (docs/bench.md, "liblock bench manycore"):

  (a) the contention sweep of J.-P. Lozi, "Towards More Scalable Mutual
      Exclusion for Multicore Architectures", PhD thesis, UPMC 2014, Figure
      5.2: lockbench with 1 and 5 shared lines, at high (100 cycles) and low
      (2,000,000 cycles) contention, every algorithm at its default policy,
      the server convention for delegation locks (--convention auto: the
      server's CPU is one the clients do not get), 2..N threads on a
      logarithmic ladder (_lockexp.sweep);
  (b) memcached Get and Set under memcslap: unmodified on glibc, unmodified
      interposed on the best classic lock of (a), transformed on rcl, at
      1..N-1 worker threads (_memcached.prepare, _memcached_bench.measure).

The budget model is plan(): from the CPU count and the options to the list of
cells with their estimated seconds.  --plan N prints it; the real run runs
that plan, asks before each run whether it still fits its part's share of the
budget (a run that does not is counted as not run), and records both the cuts
the model made to fit and the runs not run."""
import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import time

from . import _lockexp
from . import _memcached
from . import _memcached_bench
from . import _memcached_run
from . import _runner

HELP = ("many cores on one lock, in a time budget: the thesis's contention sweep (2..N threads) and memcached "
        "Get/Set (1..N-1 workers); --plan N prints the cells")

BUDGET_S = 480.0
HIGH, LOW = 100, 2000000          # delay between critical sections, cycles (the thesis's two ends)
LINES = (1, 5)                    # shared lines per critical section (the thesis's two panels)
CONFIGS = ("glibc", "best", "tr-rcl")

# The cost model, in seconds.  Measured on the 2-CPU development VM under load and rounded up; a larger
# machine is expected to be faster everywhere but in thread start-up, which is charged per thread.
LB_FIXED_S = 0.15         # one lockbench run besides its duration: process, machine description, two probes, server
LB_PER_THREAD_S = 0.001   # ... and per thread: start, pinning, join
MC_FIXED_S = 0.8          # one memcached run besides its operations: start, port wait, two memcslap starts, stop
MC_RATE_1 = 25000.0       # operations per second of memcslap against one memcached worker (2 client threads)
MC_RATE_EXP = 0.5         # the model's throughput grows as workers ** 0.5 (pessimistic for a scalable server)
MC_PROBE_S = 0.5          # the wake-up and ping-pong probes at the start of a memcached round
PREPARE_BUILT_S = 10.0    # memcached trees built: the selection's dry run of the transform
PREPARE_BUILD_S = 90.0    # not built: fetch the source, transform, configure and build both trees, select
FINAL_S = 10.0            # summaries, tables, the plot

# Degradation steps, most generous first: the first that fits is taken.  (repetitions, seconds per run)
CONTENTION_STEPS = [(5, 0.3), (5, 0.2), (5, 0.1), (4, 0.1), (3, 0.1), (3, 0.05), (2, 0.05)]
# (rounds, memcslap work as a fraction of the thesis's 10,000 sets and 30,000 gets per client thread)
MEMCACHED_STEPS = [(5, 1.0), (5, 0.5), (3, 0.5), (3, 0.25), (3, 0.1), (2, 0.1), (2, 0.05), (2, 1 / 30)]
LADDER_STEPS = (2, 4, 8)  # thread ladders: factor between two points (the last point is N, or N-1)


def ladder(lo, hi, step=2):
    """lo, lo*step, lo*step**2, ... up to hi, which is always the last point;
    a power closer to hi than a factor 1.5 gives way to hi."""
    if hi <= lo:
        return [hi]
    out, x = [], lo
    while x < hi:
        out.append(x)
        x *= step
    if len(out) > 1 and hi / out[-1] < 1.5:
        out.pop()
    return out + [hi]


def lockbench_run_s(threads, duration):
    return duration + LB_FIXED_S + LB_PER_THREAD_S * threads


def work_of(scale):
    """memcslap (sets, gets) per client thread at a fraction of the thesis's counts."""
    return (max(1, round(_memcached_bench.SET_PER_CLIENT * scale)), max(1, round(_memcached_bench.GET_PER_CLIENT * scale)))


def memcached_run_s(workers, scale):
    """One memcached run: 2 client threads per worker do their sets, then one
    client loads the get keys and every client reads them."""
    clients = 2 * workers
    sets, gets = work_of(scale)
    ops = sets * clients + gets + gets * clients
    return MC_FIXED_S + ops / (MC_RATE_1 * workers ** MC_RATE_EXP)


def _contention(ncpus, algorithms, reps, duration, step):
    cells = []
    for t in ladder(2, ncpus, step):
        for delay in (HIGH, LOW):
            for k in LINES:
                cells.append({"part": "contention", "threads": t, "delay_cycles": delay, "lines": k,
                              "algorithms": list(algorithms), "reps": reps, "duration_s": duration,
                              "runs": len(algorithms) * reps,
                              "est_s": round(len(algorithms) * reps * lockbench_run_s(t, duration), 1)})
    return cells


def _memcached_cells(ncpus, reps, scale, step):
    cells = []
    sets, gets = work_of(scale)
    for w in ladder(1, ncpus - 1, step):
        cells.append({"part": "memcached", "workers": w, "clients": 2 * w, "configs": list(CONFIGS), "reps": reps,
                      "sets_per_client": sets, "gets_per_client": gets, "runs": len(CONFIGS) * reps,
                      "est_s": round(reps * (MC_PROBE_S + len(CONFIGS) * memcached_run_s(w, scale)), 1)})
    return cells


def _candidates(kind, ncpus, algorithms, max_reps, max_duration):
    """Every setting of a part, most generous first: (settings, cells, seconds)."""
    out, seen = [], set()
    for step in LADDER_STEPS:
        for reps, x in (CONTENTION_STEPS if kind == "contention" else MEMCACHED_STEPS):
            reps = min(reps, max_reps)
            if kind == "contention":
                x = min(x, max_duration)
            key = (step, reps, x)
            if key in seen:
                continue
            seen.add(key)
            cells = (_contention(ncpus, algorithms, reps, x, step) if kind == "contention"
                     else _memcached_cells(ncpus, reps, x, step))
            out.append(({"step": step, "reps": reps, "x": x}, cells, round(sum(c["est_s"] for c in cells), 1)))
    return out


def _fit(cands, allotment):
    for c in cands:
        if c[2] <= allotment:
            return c
    return None


def plan(ncpus, algorithms, budget=BUDGET_S, max_reps=5, max_duration=0.3, memcached=True, built=False):
    """The budget model: the cells `liblock bench manycore` runs on ncpus
    CPUs, each with its estimated seconds, and what was cut to fit budget.

    Parts, in the order they run: prepare (memcached trees: PREPARE_BUILT_S if
    built, else PREPARE_BUILD_S), contention, memcached, final (FINAL_S).
    Each measuring part has a list of settings from most to least generous
    (ladder factor, then repetitions and run length or memcslap work: the
    *_STEPS lists); the two give way together: of the pairs of settings that
    fit the measuring time, the one whose worse index into its list is
    smallest, then the smallest sum of indices, then the more generous
    contention setting.  Returns a dict: ncpus,
    budget, algorithms, settings, cells, parts (seconds per part), total_s,
    fits, cuts (one line per cut: "contention: repetitions 5 -> 3")."""
    if ncpus < 2:
        raise ValueError("liblock bench manycore needs at least 2 CPUs")
    algorithms = list(algorithms)
    prep = (PREPARE_BUILT_S if built else PREPARE_BUILD_S) if memcached else 0.0
    avail = budget - prep - FINAL_S
    cc = _candidates("contention", ncpus, algorithms, max_reps, max_duration)
    mc = _candidates("memcached", ncpus, algorithms, max_reps, max_duration) if memcached else []
    fits = True
    if mc:
        # both parts give way together: the pair of settings that fits with the smallest worse index into its
        # list, then the smallest sum, then the more generous contention setting
        pairs = [(max(i, j), i + j, i, j) for i in range(len(cc)) for j in range(len(mc))
                 if cc[i][2] + mc[j][2] <= avail]
        if pairs:
            _, _, i, j = min(pairs)
        else:
            i, j, fits = len(cc) - 1, len(mc) - 1, False
        c, m = cc[i], mc[j]
    else:
        c = _fit(cc, avail)
        if c is None:
            c, fits = cc[-1], False
        m = None
    cells = []
    if memcached:
        cells.append({"part": "prepare", "built": built, "est_s": prep,
                      "what": "memcached: select the sections again (trees built)" if built else
                              "memcached: fetch the source, transform, configure and build both trees"})
    cells += c[1] + (m[1] if m else [])
    cells.append({"part": "final", "what": "summaries, tables, CSVs, the plot", "est_s": FINAL_S})
    parts = {}
    for x in cells:
        parts[x["part"]] = round(parts.get(x["part"], 0) + x["est_s"], 1)
    total = round(sum(parts.values()), 1)
    cuts = _cuts("contention", cc[0][0], c[0], ncpus, 2)
    if m:
        cuts += _cuts("memcached", mc[0][0], m[0], ncpus - 1, 1)
    return {"ncpus": ncpus, "budget_s": budget, "algorithms": algorithms, "memcached": memcached, "built": built,
            "settings": {"contention": c[0], "memcached": m[0] if m else None}, "cells": cells, "parts": parts,
            "total_s": total, "fits": fits and total <= budget, "cuts": cuts}


def _cuts(part, best, got, hi, lo):
    out = []
    if got["step"] != best["step"]:
        out.append(f"{part}: {'thread' if part == 'contention' else 'worker'} ladder "
                   f"{','.join(map(str, ladder(lo, hi, best['step'])))} -> "
                   f"{','.join(map(str, ladder(lo, hi, got['step'])))} (factor {got['step']})")
    if got["reps"] != best["reps"]:
        out.append(f"{part}: {'repetitions' if part == 'contention' else 'rounds'} {best['reps']} -> {got['reps']}")
    if got["x"] != best["x"]:
        if part == "contention":
            out.append(f"contention: seconds per run {best['x']:g} -> {got['x']:g}")
        else:
            (s0, g0), (s1, g1) = work_of(best["x"]), work_of(got["x"])
            out.append(f"memcached: memcslap work per client thread {s0} sets + {g0} gets -> {s1} + {g1} "
                       f"(x{got['x']:.3g} of the thesis's)")
    return out


def format_plan(p, local_note=""):
    """The plan as text: a line per cell, the subtotals, the total, the cuts."""
    lines = [f"liblock bench manycore plan for {p['ncpus']} CPUs: budget {p['budget_s']:.0f} s, "
             f"{len(p['algorithms'])} algorithms ({', '.join(p['algorithms'])})" + (f"; {local_note}" if local_note else "")]
    for part in ("prepare", "contention", "memcached", "final"):
        cs = [c for c in p["cells"] if c["part"] == part]
        if not cs:
            continue
        if part == "contention":
            s = p["settings"]["contention"]
            lines.append(f"  contention: lockbench, every algorithm at its default policy, --convention auto "
                         f"(delegation: server convention), {s['reps']} repetitions x {s['x']:g} s per run, "
                         f"interleaved")
            lines.append(f"    {'threads':>7} {'delay':>8} {'lines':>5} {'runs':>5} {'est s':>7}")
            for c in cs:
                lines.append(f"    {c['threads']:>7} {c['delay_cycles']:>8} {c['lines']:>5} {c['runs']:>5} {c['est_s']:>7.1f}")
        elif part == "memcached":
            s = p["settings"]["memcached"]
            sets, gets = work_of(s["x"])
            lines.append(f"  memcached: memcslap Get and Set; glibc (unmodified), best (unmodified, interposed on the "
                         f"best classic lock of the sweep), tr-rcl (transformed, rcl); {s['reps']} rounds, "
                         f"interleaved; 2 client threads per worker, {sets} sets + {gets} gets per client thread")
            lines.append(f"    {'workers':>7} {'clients':>8} {'runs':>5} {'est s':>7}")
            for c in cs:
                lines.append(f"    {c['workers']:>7} {c['clients']:>8} {c['runs']:>5} {c['est_s']:>7.1f}")
        else:
            lines.append(f"  {part}: {cs[0]['what']}: {cs[0]['est_s']:.0f} s")
        if part in ("contention", "memcached"):
            lines.append(f"    {part} subtotal: {sum(c['runs'] for c in cs)} runs, {p['parts'][part]:.0f} s")
    lines.append(f"  total: {p['total_s']:.0f} s of {p['budget_s']:.0f} s"
                 + ("" if p["fits"] else "  -- DOES NOT FIT, even at the smallest setting"))
    lines.append("  cut to fit: " + ("; ".join(p["cuts"]) if p["cuts"] else "nothing"))
    return "\n".join(lines)


def add_arguments(sub, common):
    sp = sub.add_parser("manycore", help=HELP, description=HELP)
    common(sp)
    for act in sp._actions:
        if act.dest == "reps":
            act.help = "at most this many repetitions (contention) and rounds (memcached) (default 5)"
        elif act.dest == "timeout":
            act.default, act.help = 5.0, "time bound of each lockbench run past its end (s, default 5)"
    sp.add_argument("--budget", type=float, default=BUDGET_S,
                    help=f"seconds the whole command may take (default {BUDGET_S:.0f}); sizes every run")
    sp.add_argument("--plan", type=int, metavar="N", help="print the cells and the time it would use on N CPUs; run nothing")
    sp.add_argument("--algorithms", default="all", help="comma-separated names, or 'all' (default)")
    sp.add_argument("--baseline", default="posix", help="ratios are against this algorithm (default posix)")
    sp.add_argument("--duration", type=float, default=0.3, help="at most this many seconds per lockbench run (default 0.3)")
    sp.add_argument("--no-memcached", action="store_true", help="leave out the memcached part (said in the output)")
    sp.add_argument("--best", default="auto",
                    help="the classic lock unmodified memcached is interposed on (default auto: the lowest mean "
                         "latency of the sweep at high contention and its largest thread count)")
    g = sp.add_argument_group("memcached's trees (as `liblock bench apps memcached`)")
    _memcached_run.add_build_arguments(g, profile_help="bench/memcached/profile-get-set.json, the saved profile")


NEEDED = ("bin/lockbench", "bin/liblock-info", "bin/wake_probe", "lib/liblock.so", "lib/liblock-interpose.so")


def ensure_built(env):
    """Build the programs this command runs when one is missing (and only
    those): make TARGETS in the source tree.  Returns the targets built."""
    build = os.path.dirname(env.libdir)
    missing = [t for t in NEEDED if not os.path.exists(os.path.join(build, t))]
    if not missing:
        return []
    if not env.root or not os.path.exists(os.path.join(env.root, "Makefile")):
        raise SystemExit(f"liblock bench manycore: {', '.join(missing)} missing in {build} (not a source tree to build)")
    print(f"liblock bench manycore: building {', '.join(missing)} (make)", file=sys.stderr)
    r = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 2}", f"BUILD={build}"]
                       + [os.path.join(build, t) for t in missing], cwd=env.root)
    if r.returncode != 0:
        raise SystemExit(f"liblock bench manycore: make {' '.join(missing)} failed (exit {r.returncode})")
    return missing


def memcached_unavailable(args, env, built):
    """Why the memcached part cannot run here, in one line, or None."""
    if not shutil.which("memcslap"):
        return "memcslap is not installed (Debian's libmemcached-tools; scripts/deps.sh installs it)"
    if not os.path.isfile(args.profile or ""):
        return f"no profile {args.profile} (--profile)"
    if built and not args.rebuild:
        return None
    wd = _memcached.workdir(env, args.build_dir, create=False)
    if not glob.glob(os.path.join(wd, "src", "memcached-*/")) and not (shutil.which("apt-get") and shutil.which("dpkg-source")):
        return "apt-get and dpkg-source (dpkg-dev) are needed to fetch memcached's source (scripts/deps.sh)"
    for tool in ("make", "cc"):
        if not shutil.which(tool):
            return f"{tool} is needed to build memcached"
    if not any(os.path.exists(os.path.join(d, "event.h")) for d in ("/usr/include", "/usr/local/include")):
        return "libevent-dev is not installed (memcached's build needs it; scripts/deps.sh)"
    from .transform import import_clang
    try:
        import_clang()
    except SystemExit as e:
        return str(e).replace("liblock transform: ", "", 1) + " (the transform needs them)"
    return None


def _algorithm_names(env, text):
    if os.path.exists(os.path.join(env.bindir, "liblock-info")):
        return _lockexp.pick_algorithms(env, text)
    names = sorted(os.path.basename(f)[:-2] for f in glob.glob(os.path.join(env.root or "", "src", "locks", "*", "*.c")))
    if text not in ("all", ""):
        names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise SystemExit("liblock bench manycore: no algorithm list (build first: make)")
    return names


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for f in self.streams:
            f.write(s)
        return len(s)

    def flush(self):
        for f in self.streams:
            f.flush()


def run(args, env):
    if args.budget <= 0 or args.duration <= 0:
        print("liblock bench manycore: --budget and --duration must be > 0", file=sys.stderr)
        return 2
    root = env.root or ""
    if args.profile is None:
        args.profile = os.path.join(root, "bench", "memcached", "profile-get-set.json")
    memcached = not args.no_memcached
    wd = _memcached.workdir(env, args.build_dir, create=False)
    built = _memcached.built(wd) and not args.rebuild
    if args.plan is not None:
        if args.plan < 2:
            print("liblock bench manycore: --plan needs N >= 2 CPUs", file=sys.stderr)
            return 2
        algos = _algorithm_names(env, args.algorithms)
        p = plan(args.plan, algos, args.budget, args.reps, args.duration, memcached, built)
        print(format_plan(p, "memcached trees " + ("built here" if built else "not built here: their build is reserved")
                          if memcached else "memcached part left out (--no-memcached)"))
        return 0 if p["fits"] else 1
    ncpus = os.cpu_count() or 1
    if ncpus < 2:
        print("liblock bench manycore: needs at least 2 CPUs", file=sys.stderr)
        return 2
    if memcached:  # before anything runs: the part cannot run here, say why in one line
        why = memcached_unavailable(args, env, built)
        if why:
            print(f"liblock bench manycore: the memcached part cannot run: {why}; --no-memcached leaves it out",
                  file=sys.stderr)
            return 2
    built_now = ensure_built(env)
    t0 = time.monotonic()
    reg = {a["name"]: a for a in _lockexp.registry(env)}
    algos = _lockexp.pick_algorithms(env, args.algorithms)
    p = plan(ncpus, algos, args.budget, args.reps, args.duration, memcached, built)
    text = format_plan(p, "memcached trees " + ("built" if built else "to build") if memcached
                       else "memcached part left out (--no-memcached)")
    if not p["fits"]:
        print(text)
        print(f"liblock bench manycore: the plan does not fit in {args.budget:.0f} s: raise --budget or name fewer "
              f"--algorithms", file=sys.stderr)
        return 2
    d = _runner.out_dir(env, "manycore", args.out)
    table = open(os.path.join(d, "table.txt"), "w")
    stdout = sys.stdout
    sys.stdout = _Tee(stdout, table)
    try:
        rc = _run(args, env, p, text, d, reg, algos, t0, built_now)
    finally:
        sys.stdout = stdout
        table.close()
    print(f"results: {d} (table.txt, plan.json, meta.json, contention/"
          + (", memcached/" if p["memcached"] else "") + (", manycore.png" if not args.no_plot else "") + ")")
    return rc


def _run(args, env, p, text, d, reg, algos, t0, built_now):
    print(text)
    print()
    budget_end = t0 + args.budget
    later = {"contention": p["parts"].get("memcached", 0) + FINAL_S, "memcached": FINAL_S}
    runtime = {}
    memcached = p["memcached"]
    mc_error = None
    trees = None
    # 1. memcached's trees (built only when missing or changed)
    if memcached:
        t = time.monotonic()
        try:
            md = os.path.join(d, "memcached")
            os.makedirs(md, exist_ok=True)
            wd, orig, tr, report, version, sites, sel = _memcached.prepare(args, env, md, None)
            trees = {"orig": orig, "tr": tr}
            n, _ = _memcached.summarise_report(report, sites)
            with open(os.path.join(md, "transform-report.json"), "w") as f:
                json.dump({"version": version, "sections": report, "only": sel["only"], "files": sel["files"]}, f,
                          indent=1)
            print(f"memcached: {version}, {len(n['transformed'])} sections transformed (the top {args.top_locks} locks "
                  f"of {os.path.relpath(args.profile, env.root or '.')}), trees in {wd}")
        except SystemExit as e:
            mc_error = " ".join(str(e).split())
        runtime["prepare"] = {"planned_s": p["parts"]["prepare"], "actual_s": round(time.monotonic() - t, 1)}

    def may_run(part, est):
        return guard(budget_end - later[part], est)

    # 2. the contention sweep
    s = p["settings"]["contention"]
    cells = [c for c in p["cells"] if c["part"] == "contention"]
    points = [(c["threads"], c["delay_cycles"], c["lines"]) for c in cells]
    a2 = argparse.Namespace(**vars(args))
    a2.reps, a2.context, a2.convention, a2.pin, a2.count, a2.wait = s["reps"], 0, "auto", "rr", 0, None
    cd = os.path.join(d, "contention")
    os.makedirs(cd, exist_ok=True)
    t = time.monotonic()
    print("(a) contention sweep (the thesis's Figure 5.2 along the thread axis)")
    rows, summary, cmeta, c_not_run = _lockexp.sweep(
        a2, env, "manycore", algos, points, s["x"], cd,
        may_run=may_run("contention", lambda th: lockbench_run_s(th, s["x"])), by_threads=True, plot=False,
        meta_extra={"ncpus": p["ncpus"], "plan_settings": s})
    runtime["contention"] = {"planned_s": p["parts"]["contention"], "actual_s": round(time.monotonic() - t, 1),
                             "runs_planned": sum(c["runs"] for c in cells), "runs_not_run": c_not_run}
    psum, preg = _lockexp.plot_summary(rows, summary)
    best, why_best = pick_best(args.best, psum, preg, algos, reg)
    # 3. memcached
    mc_rows, mc_summary = [], []
    if memcached:
        print()
        print("(b) memcached Get and Set")
        if mc_error is None:
            print(f"best classic lock for the unmodified memcached: {best} ({why_best})")
            sm = p["settings"]["memcached"]
            mcells = [c for c in p["cells"] if c["part"] == "memcached"]
            a3 = argparse.Namespace(**vars(args))
            a3.reps = sm["reps"]
            cfgs = [("glibc", "orig", None), (best, "orig", best), ("tr-rcl", "tr", "rcl")]
            work = work_of(sm["x"])
            t = time.monotonic()
            try:
                mc_rows, m_not_run = _memcached_bench.measure(
                    a3, env, trees, os.path.join(d, "memcached"), cfgs=cfgs, points=[c["workers"] for c in mcells],
                    work=work, may_run=may_run("memcached", lambda w: memcached_run_s(w, sm["x"])),
                    timeout=max(60.0, 10 * memcached_run_s(max(c["workers"] for c in mcells), sm["x"])))
            except SystemExit as e:
                mc_error, m_not_run = " ".join(str(e).split()), 0
            runtime["memcached"] = {"planned_s": p["parts"]["memcached"], "actual_s": round(time.monotonic() - t, 1),
                                    "runs_planned": sum(c["runs"] for c in mcells), "runs_not_run": m_not_run}
            if mc_rows:
                mc_summary = memcached_table(mc_rows, [c[0] for c in cfgs], [c["workers"] for c in mcells], CONFIGS)
                _runner.write_csv(os.path.join(d, "memcached", "summary.csv"), mc_summary,
                                  ["workers", "clients", "config", "role", "test", "n", "failed", "ops_median", "ops_min",
                                   "ops_max", "ratio_median", "ratio_min", "ratio_max"])
            failed = sum(1 for r in mc_rows if r["status"] != "ok")
            if mc_rows and failed == len(mc_rows):
                mc_error = f"every memcached run failed (first: {mc_rows[0].get('error')}; memcached/bench.csv)"
        if mc_error:
            print(f"memcached part FAILED: {mc_error}")
    else:
        print()
        print("(b) memcached: not run (--no-memcached)")
    # 4. what was cut, the plot, the records
    print()
    print("cut to fit the budget (the model): " + ("; ".join(p["cuts"]) if p["cuts"] else "nothing"))
    for part, r in runtime.items():
        if r.get("runs_not_run"):
            print(f"cut at run time: {part}: {r['runs_not_run']} of {r['runs_planned']} runs not run (its share of the "
                  f"budget was used up: {r['actual_s']:.0f} s against {r['planned_s']:.0f} s planned)")
    print("time: " + ", ".join(f"{k} {r['actual_s']:.0f} s (planned {r['planned_s']:.0f} s)" for k, r in runtime.items())
          + f"; built first (not in the budget): {', '.join(built_now) if built_now else 'nothing'}")
    meta = {"ncpus": p["ncpus"], "best": best, "best_why": why_best, "memcached": "off (--no-memcached)" if not memcached
            else ("failed: " + mc_error if mc_error else "ok"), "cuts": p["cuts"], "runtime": runtime,
            "dominant_regime": preg, "algorithms": algos, "git_commit": cmeta.get("git_commit"),
            "date_utc": cmeta.get("date_utc")}
    if not args.no_plot:
        from . import _plots
        mc = {}
        label = {"glibc": "glibc (unmodified)", "best": f"{best} (unmodified, interposed)",
                 "tr-rcl": "rcl (transformed)"}
        for s2 in mc_summary:
            mc.setdefault(s2["test"], []).append((label[s2["role"]], s2["workers"], s2["ops_median"], s2["ops_min"],
                                                   s2["ops_max"]))
        f = _plots.manycore_plot(psum, preg, algos, mc, meta, os.path.join(d, "manycore.png"))
        if f:
            print(f"plot: {f}")
    runtime["total_s"] = round(time.monotonic() - t0, 1)
    print(f"total {runtime['total_s']:.0f} s of the {args.budget:.0f} s budget")
    with open(os.path.join(d, "plan.json"), "w") as f:
        json.dump({**p, "runtime": runtime}, f, indent=1)
    _runner.write_meta(d, env, args, {"experiment": "manycore", **meta})
    return 1 if mc_error else 0


def guard(deadline, est, clock=time.monotonic):
    """may_run(x) for a part that must end by deadline (clock's time): a run
    whose estimate est(x) would take it past the deadline is not started."""
    return lambda x: clock() + est(x) <= deadline


def pick_best(given, summary, regime, algos, reg):
    """The lock the unmodified memcached is interposed on: `given`, or with
    'auto' the classic (non-delegating) algorithm of the sweep with the lowest
    geometric mean over the line counts of its mean cycles per critical
    section at high contention and the largest thread count measured there;
    mcs when the sweep has none.  Returns (name, why)."""
    if given != "auto":
        return given, "--best"
    classic = [a for a in algos if "delegates" not in reg.get(a, {}).get("properties", [])]
    sel = [s for s in summary if s.get("regime") == regime and s.get("n") and s.get("delay_cycles") == HIGH
           and s.get("algorithm") in classic and s.get("lat_cycles_mean_median")]
    if not sel:
        return "mcs", "no classic lock in the sweep's usable runs: the default"
    tmax = max(s["threads"] for s in sel)
    score = {}
    for a in classic:
        v = [s["lat_cycles_mean_median"] for s in sel if s["algorithm"] == a and s["threads"] == tmax]
        if len(v) == len({s["lines"] for s in sel if s["threads"] == tmax}):
            score[a] = math.exp(sum(math.log(x) for x in v) / len(v))
    if not score:
        return "mcs", "no classic lock at every line count: the default"
    a = min(score, key=score.get)
    return a, f"lowest mean cycles per critical section at high contention, {tmax} threads, of the classic locks"


def memcached_table(rows, names, workers, roles):
    """Print Get and Set: a line per worker count, a column per configuration
    (ops/s, and the ratio to glibc of the same round); return the summary rows
    (ratios rounded to 3 digits; role: the configuration's part, CONFIGS)."""
    out = []
    for w in workers:
        for n, role in zip(names, roles):
            for test in ("get", "set"):
                x = _memcached_bench.ratios(rows, n, test, w)
                x.update({k: round(v, 3) for k, v in x.items() if k.startswith("ratio_") and v is not None})
                out.append({"workers": w, "clients": 2 * w, "config": n, "role": role, "test": test, **x})
    reps = max((r["rep"] for r in rows), default=0) + 1
    print(f"memcslap ops/s, median over up to {reps} interleaved rounds; (x) = ratio to glibc in the same round, "
          f"median")
    for test in ("get", "set"):
        print(f"{test.capitalize():<8}" + "".join(f"{n:>22}" for n in names))
        for w in workers:
            line = f"{'W=' + str(w):<8}"
            for n in names:
                x = next(s for s in out if s["workers"] == w and s["config"] == n and s["test"] == test)
                cell = f"{x['ops_median'] / 1e3:.1f}K" if x["ops_median"] else "-"
                if n != "glibc" and x["ratio_median"]:
                    cell += f" ({x['ratio_median']:.2f}x)"
                if x["failed"]:
                    cell += f" {x['failed']} failed"
                line += f"{cell:>22}"
            print(line)
    return out
