"""`liblock bench startup`: what the interposer adds to a process's start.

Two workloads, each started plain (glibc) and interposed, interleaved
(plain, warm, cold, plain, warm, cold, ...), medians of the wall times:
  true   one `/bin/true` (posix_spawn + waitpid, timed here);
  loop   a shell starting N `/bin/true` in a loop (every process inherits
         the interposer, as every child of a script run under `liblock run`).
Interposed runs get the environment `liblock run --lock LOCK` gives its
program (LD_PRELOAD, LIBLOCK_LOCK, LIBLOCK_STRICT=1):
  warm   with LIBLOCK_CALIBRATION (the figures `liblock run` hands down) and
         the machine's cache in place;
  cold   without LIBLOCK_CALIBRATION and with an empty cache directory for
         every run: the first process on a fresh machine.
Also timed, interleaved the same way: `liblock-info --calibration` with an
empty cache (what the first `liblock run` on a machine pays once, to
measure the figures) and with the cache (what every later one pays).
--interposer PATH measures another build's liblock-interpose.so (a build
that does not know LIBLOCK_CALIBRATION simply ignores it); --before PATH adds
that build as one more arm of the same interleaved rounds.
Results: runs.csv (one row per run), summary.csv (medians, ratios to plain).
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

from . import _runner


def add_arguments(sub, common):
    sp = sub.add_parser("startup", help="start-up cost of a process under the interposer: /bin/true and a shell "
                                        "loop of N /bin/true, plain vs interposed (warm and cold cache), medians")
    common(sp, reps=41, unused=("timeout", "probe_tolerance", "regimes"))
    sp.add_argument("--lock", default="mcs", help="algorithm for the interposed runs (default mcs)")
    sp.add_argument("--loop", type=int, default=200, help="processes per shell loop (default 200)")
    sp.add_argument("--loop-reps", type=int, default=9, help="repetitions of the loop workload (default 9)")
    sp.add_argument("--interposer", help="the liblock-interpose.so to measure (default this build's)")
    sp.add_argument("--before", metavar="PATH",
                    help="another build's liblock-interpose.so, measured in the same interleaved rounds "
                         "(arm 'before', same environment as 'warm')")


def _spawn_ms(argv, envp):
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, envp, file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, st = os.waitpid(pid, 0)
    dt = (time.perf_counter_ns() - t0) / 1e6
    if not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 0:
        raise RuntimeError(f"{argv[0]} failed (status {st})")
    return dt


def run(args, env):
    if args.before and not os.path.isfile(args.before):
        # a missing LD_PRELOAD file is only a warning to the dynamic loader: the arm would time plain runs
        print(f"liblock bench startup: --before {args.before}: no such file", file=sys.stderr)
        return 2
    lib = os.path.abspath(args.interposer) if args.interposer else env.lib("liblock-interpose.so")
    info = os.path.join(env.bindir, "liblock-info")
    sh = shutil.which("sh")
    true = "/bin/true" if os.path.exists("/bin/true") else shutil.which("true")
    for need in (lib, info):
        if not os.path.exists(need):
            print(f"liblock bench startup: {need} is missing (run `make` first)", file=sys.stderr)
            return 2
    if args.loop < 1 or args.loop_reps < 1:
        print("liblock bench startup: --loop and --loop-reps must be at least 1", file=sys.stderr)
        return 2
    d = _runner.out_dir(env, "startup", args.out)
    scratch = tempfile.mkdtemp(prefix="liblock-startup-")
    try:
        return _measure(args, env, lib, info, sh, true, d, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _measure(args, env, lib, info, sh, true, d, scratch):
    base = {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "LIBLOCK_CALIBRATION", "LIBLOCK_CACHE_DIR") and not k.startswith("LIBLOCK_")}
    warm_cache = os.path.join(scratch, "warm")
    cal = base | {"LIBLOCK_CACHE_DIR": warm_cache}
    import subprocess
    out = subprocess.run([info, "--calibration"], env=cal, capture_output=True, text=True, timeout=60)
    figures = out.stdout.strip()
    plain = dict(base)
    inter = base | {"LD_PRELOAD": lib, "LIBLOCK_LOCK": args.lock, "LIBLOCK_STRICT": "1"}
    warm = inter | {"LIBLOCK_CALIBRATION": figures, "LIBLOCK_CACHE_DIR": warm_cache}
    n_cold = [0]

    def cold():
        n_cold[0] += 1
        c = os.path.join(scratch, f"cold{n_cold[0]}")  # a fresh, empty cache every run
        return inter | {"LIBLOCK_CACHE_DIR": c}

    loop_cmd = [sh, "-c", f'i=0; while [ $i -lt {args.loop} ]; do {true}; i=$((i+1)); done']
    rows = []

    def series(workload, cmd, reps, arms):
        for rep in range(reps):
            for arm, mkenv in arms:
                e = mkenv()
                ms = _spawn_ms(cmd, e)
                rows.append({"workload": workload, "arm": arm, "rep": rep, "ms": round(ms, 4)})
                if not args.quiet:
                    print(f"\r{workload} {rep + 1}/{reps}", end="", file=sys.stderr)
        if not args.quiet:
            print(file=sys.stderr)

    arms = [("plain", lambda: plain), ("warm", lambda: warm), ("cold", cold)]
    if args.before:
        before = warm | {"LD_PRELOAD": os.path.abspath(args.before)}
        arms.append(("before", lambda: before))
    series("true", [true], args.reps, arms)
    series(f"loop{args.loop}", loop_cmd, args.loop_reps, arms)
    cal_arms = [("calibration-cached", lambda: cal),
                ("calibration-cold", lambda: base | {"LIBLOCK_CACHE_DIR": os.path.join(scratch, f"c{len(rows)}")})]
    series("liblock-info --calibration", [info, "--calibration"], max(3, args.reps // 4), cal_arms)

    _runner.write_csv(os.path.join(d, "runs.csv"), rows, first=("workload", "arm", "rep", "ms"))
    summary = []
    for w in dict.fromkeys(r["workload"] for r in rows):
        meds = {}
        for a in dict.fromkeys(r["arm"] for r in rows if r["workload"] == w):
            vals = [r["ms"] for r in rows if r["workload"] == w and r["arm"] == a]
            meds[a] = statistics.median(vals)
            summary.append({"workload": w, "arm": a, "runs": len(vals), "median_ms": round(meds[a], 3),
                            "min_ms": round(min(vals), 3), "max_ms": round(max(vals), 3)})
        ref = meds.get("plain") or meds.get("calibration-cached")
        for s in summary:
            if s["workload"] == w and ref:
                s["ratio"] = round(s["median_ms"] / ref, 2)
    _runner.write_csv(os.path.join(d, "summary.csv"), summary)
    _runner.write_meta(d, env, args, {"interposer": lib, "lock": args.lock, "figures": figures})
    print(f"liblock bench startup: {lib} --lock {args.lock}; figures handed down: {figures}")
    print(f"{'workload':<28} {'arm':<20} {'median ms':>10} {'min':>8} {'max':>8} {'ratio':>6}")
    for s in summary:
        print(f"{s['workload']:<28} {s['arm']:<20} {s['median_ms']:>10.3f} {s['min_ms']:>8.3f} {s['max_ms']:>8.3f} "
              f"{s.get('ratio', ''):>6}")
    print(f"(ratio: to plain; for liblock-info, to the cached run.  Results in {d})")
    return 0
