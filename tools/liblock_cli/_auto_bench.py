"""`liblock bench auto`: does `auto` find, while a program runs, the
algorithm one would have picked after measuring them all?  Each program runs
with glibc, with `auto` and with every fixed algorithm of the catalogue under
its default waiting policy, interleaved in each round (glibc first, the
others in an order rotated each round), at each thread count:

  bbuf       C++ std::mutex + std::condition_variable bounded buffer  (interposer)
  pyqueue    Python queue.Queue, producers and consumers               (interposer)
  sqlite     threads on one sqlite3 FULLMUTEX connection               (interposer)
  kccache    Kyoto Cabinet's kccachetest order -rnd (Debian package)   (interposer)
  randarray  the Malthusian-locks RandArray workload, build/bin/malthus (API)
  lockbench  one shared line per critical section, 100 cycles between (API)

Under the interposer a program is unmodified (LD_PRELOAD, LIBLOCK_LOCK, as
`liblock run` sets them, auto's calibrated choices included) and glibc is the
program without it; a program on the API takes the algorithm by name and its
glibc is `posix` (glibc's mutex behind the API).  Throughput is 1 / wall time
for the interposed programs (fixed work, checked by the program), the
program's own rate for the API ones (fixed time).  kccache and randarray are
held out (docs/auto.md): they were first run under auto after its rules were
fixed and must not be used to tune them.

Each auto run writes its switches (LIBLOCK_AUTO_LOG) under autolog/; the runs
record how many there were and the candidate the last one chose.  Targets
and their computation: _auto_targets.py."""
import glob
import json
import os
import shutil
import signal
import sys
import time

from . import _apps
from . import _auto_targets
from . import _autochoice
from . import _runner
from ._lockexp import registry
from ._profadvice import load_thresholds

PROGRAMS = ("bbuf", "pyqueue", "sqlite", "kccache", "randarray", "lockbench")
INTERPOSED = ("bbuf", "pyqueue", "sqlite", "kccache")
HELD_OUT = ("kccache", "randarray")
FIRST = ["rep", "program", "threads", "algorithm", "status", "throughput", "seconds", "ratio_vs_glibc", "bound_s",
         "auto_switches", "auto_last", "output", "probe_ns"]


def add_arguments(sub, common):
    sp = sub.add_parser("auto", help="auto against glibc and every fixed algorithm on the application set, "
                                     "interleaved: the targets of docs/auto.md")
    common(sp, reps=5, unused=("probe_tolerance", "regimes", "timeout"))  # bounded by --bound; probes recorded
    sp.add_argument("--algorithms", "--locks", dest="algorithms", default="all",
                    help="the fixed algorithms, comma-separated, or 'all' (default: every one but auto)")
    sp.add_argument("--programs", default=",".join(PROGRAMS), help=f"programs (default {','.join(PROGRAMS)})")
    sp.add_argument("--threads-list", default="2,8,32", help="thread counts (default 2,8,32)")
    sp.add_argument("--scale", type=float, default=1.0, help="work of the fixed-work programs (default 1)")
    sp.add_argument("--duration", type=float, default=0.5, help="seconds per run of the API programs (default 0.5)")
    sp.add_argument("--bound", type=float, default=10.0,
                    help="a fixed-work run is killed past this many times its round's glibc run (default 10)")
    sp.add_argument("--min-bound", type=float, default=1.0, help="... but never before this many seconds (default 1)")
    sp.add_argument("--variant", action="append", default=[], metavar="NAME:VAR=VALUE[,VAR=VALUE]",
                    help="also run auto with these LIBLOCK_AUTO_* settings, as 'auto:NAME' (repeatable; e.g. "
                         "under-mcs:LIBLOCK_AUTO_UNDER=mcs); reported beside auto, never as a fixed algorithm")


def _kc_cmd(threads, scale):
    kc = shutil.which("kccachetest")
    if not kc:
        raise SystemExit("liblock bench auto: kccachetest is missing (Debian package kyotocabinet-utils; "
                         "scripts/deps.sh installs it)")
    return [kc, "order", "-th", str(threads), "-rnd", str(max(1000, int(400000 * scale) // threads))]


def command(env, prog, threads, algo, args):
    """(argv, extra environment) of one run; algo 'glibc' is the baseline."""
    if prog in ("bbuf", "pyqueue", "sqlite"):
        return _apps.app_cmd(env, prog, threads, args.scale), {}
    if prog == "kccache":
        return _kc_cmd(threads, args.scale), {}
    name = "posix" if algo == "glibc" else algo
    if prog == "randarray":
        return [env.program("malthus"), "-w", "randarray", "-l", name, "-t", str(threads), "-d",
                f"{args.duration:g}", "-n"], {}
    if prog == "lockbench":
        return [env.program("lockbench"), "-a", name, "-t", str(threads), "-D", f"{args.duration:g}",
                "--no-probe"], {}
    raise SystemExit(f"liblock bench auto: unknown program '{prog}' (valid: {', '.join(PROGRAMS)})")


def _api_result(prog, recs):
    """(throughput, message) from an API program's last JSON record."""
    r = recs[-1] if recs else {}
    if r.get("status", "ok") != "ok":
        return None, f"{r.get('status')}: {r.get('error', '')}"[:200]
    if r.get("check") != "ok":
        return None, f"check {r.get('check')}"
    return r.get("throughput" if prog == "randarray" else "throughput_cs_per_s"), ""


def parse_variants(specs):
    """{'auto:NAME': {VAR: VALUE}} from --variant NAME:VAR=VALUE[,VAR=VALUE]."""
    out = {}
    for spec in specs:
        name, sep, rest = spec.partition(":")
        kv = [x.partition("=") for x in rest.split(",") if x]
        if not sep or not name or not kv or any(not k.startswith("LIBLOCK_AUTO_") or not eq for k, eq, _ in kv):
            raise SystemExit(f"liblock bench auto: --variant '{spec}': expected NAME:LIBLOCK_AUTO_VAR=VALUE[,...]")
        out[f"auto:{name}"] = {k: v for k, _, v in kv}
    return out


def run_one(env, prog, threads, algo, args, base_env, lib, bound, log):
    name = "auto" if algo.startswith("auto:") else algo
    cmd, extra = command(env, prog, threads, name, args)
    e = dict(base_env, **extra)
    if algo != "glibc":
        e["LIBLOCK_STRICT"] = "1"
        if prog in INTERPOSED:
            e["LD_PRELOAD"], e["LIBLOCK_LOCK"] = lib, name
        if name == "auto":
            e.update(args.variants.get(algo, {}))
            _autochoice.auto_env(e, load_thresholds)
            e["LIBLOCK_AUTO_LOG"] = log
    if prog in INTERPOSED:
        st, s, line = _apps.run_once(cmd, e, bound, ok_last=prog == "kccache")
        return st, (1.0 / s if st == "ok" and s else None), s, line
    t0 = time.monotonic()
    recs = _runner.run_program(cmd, args.duration + 30.0, env=e)
    s = time.monotonic() - t0
    thr, msg = _api_result(prog, recs)
    return ("ok", thr, s, "") if thr else ("failed", None, s, msg)


def _switches(log):
    """(number of switches, the candidate the last one chose) from an auto log."""
    try:
        lines = open(log).read().splitlines()
    except OSError:
        return 0, ""
    last = lines[-1].split(" -> ")[1].split(":")[0] if lines and " -> " in lines[-1] else ""
    return len(lines), last


def run(args, env):
    reg = {a["name"]: a for a in registry(env)}
    if "auto" not in reg:
        raise SystemExit("liblock bench auto: this build has no 'auto' algorithm")
    if args.algorithms in ("all", ""):
        fixed = [a for a in reg if a != "auto"]
    else:
        fixed = [x.strip() for x in args.algorithms.split(",") if x.strip() and x.strip() != "auto"]
        bad = [a for a in fixed if a not in reg]
        if bad:
            raise SystemExit(f"liblock bench auto: unknown algorithm(s): {', '.join(bad)} (see `liblock list`)")
    progs = [x.strip() for x in args.programs.split(",") if x.strip()]
    bad = [p for p in progs if p not in PROGRAMS]
    if bad:
        raise SystemExit(f"liblock bench auto: unknown program(s) {', '.join(bad)} (valid: {', '.join(PROGRAMS)})")
    tlist = _runner.parse_list(args.threads_list, int, "--threads-list")
    if any(t < 2 for t in tlist):
        raise SystemExit("liblock bench auto: thread counts must be >= 2")
    if args.bound <= 1 or args.min_bound <= 0 or args.scale <= 0 or args.duration <= 0:
        raise SystemExit("liblock bench auto: --bound must be > 1; --min-bound, --scale, --duration > 0")
    lib = env.lib("liblock-interpose.so")
    if any(p in INTERPOSED for p in progs) and not os.path.exists(lib):
        raise SystemExit(f"liblock bench auto: {lib} is missing (run `make` first)")
    for p in progs:  # every program can be run before anything is measured
        command(env, p, tlist[0], "auto", args)
    args.variants = parse_variants(args.variant)
    variants = list(args.variants)
    d = _runner.out_dir(env, "auto", args.out)
    logs = os.path.join(d, "autolog")
    os.makedirs(logs, exist_ok=True)
    for f in glob.glob(os.path.join(logs, "*.log")):
        os.unlink(f)
    algos = ["auto"] + variants + fixed
    points = [(p, t) for p in progs for t in tlist]
    total = args.reps * len(points) * (len(algos) + 1)
    print(f"liblock bench auto: {len(progs)} programs x threads {','.join(map(str, tlist))} x (auto + {len(variants)} variant(s) + "
          f"{len(fixed)} fixed + glibc) x {args.reps} rounds = up to {total} runs; {os.cpu_count()} CPUs; results in {d}",
          file=sys.stderr)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("LIBLOCK_") and k != "LD_PRELOAD"}
    prog_bar = _runner.Progress(total, args.quiet)
    rows, hits = [], {}
    signal.signal(signal.SIGTERM, _apps._kill_current)
    import datetime
    date0 = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for rep in range(args.reps):
        pr = _runner.probes(env)
        for (prog, t) in points:
            st, thr, g, line = run_one(env, prog, t, "glibc", args, base_env, lib, 120.0, None)
            rows.append({"rep": rep, "program": prog, "threads": t, "algorithm": "glibc", "status": st,
                         "throughput": thr, "seconds": round(g, 4) if g else "", "ratio_vs_glibc": 1.0 if thr else "",
                         "bound_s": 120.0, "output": line if st != "ok" else "", "probe_ns": pr.get("probe_ns", "")})
            prog_bar.step(f"{prog} T={t} glibc round {rep + 1}/{args.reps}" + ("" if st == "ok" else f" [{st}]"))
            bound = max(args.min_bound, args.bound * g) if st == "ok" and g else 120.0
            for i in range(len(algos)):
                algo = algos[(i + rep) % len(algos)]
                row = {"rep": rep, "program": prog, "threads": t, "algorithm": algo, "bound_s": round(bound, 3),
                       "probe_ns": pr.get("probe_ns", "")}
                k = (prog, t, algo)
                if hits.get(k, 0) > args.reps // 2:
                    row.update(status="skipped", throughput="", seconds="", ratio_vs_glibc="",
                               output="median already past the bound")
                else:
                    log = os.path.join(logs, f"{prog}-{t}-{rep}-{algo.replace(':', '-')}.log")
                    st, a_thr, s, line = run_one(env, prog, t, algo, args, base_env, lib, bound, log)
                    if st == "bound":
                        hits[k] = hits.get(k, 0) + 1
                    row.update(status=st, throughput=a_thr, seconds=round(s, 4) if s else "",
                               ratio_vs_glibc=round(a_thr / thr, 3) if a_thr and thr else "",
                               output=line if st != "ok" else "")
                    if algo.startswith("auto"):
                        row["auto_switches"], row["auto_last"] = _switches(log)
                rows.append(row)
                prog_bar.step(f"{prog} T={t} {algo} round {rep + 1}/{args.reps}"
                              + ("" if row["status"] == "ok" else f" [{row['status']}]"))
            _runner.write_csv(os.path.join(d, "runs.csv"), rows, FIRST)
    summary = _auto_targets.summarise(rows, points, fixed, variants)
    _runner.write_csv(os.path.join(d, "summary.csv"), summary, ["program", "threads", "glibc_throughput", "best",
                                                                  "best_median", "auto_median", "auto_vs_best_median"])
    meta = _runner.write_meta(d, env, args, {"experiment": "auto", "programs": progs, "threads": tlist,
                                             "fixed": fixed, "variants": args.variants, "held_out": [p for p in progs if p in HELD_OUT],
                                             "commands": {f"{p} T={t}": " ".join(command(env, p, t, "ALGO", args)[0])
                                                          for (p, t) in points},
                                             "ncpus": os.cpu_count(), "runs": len(rows), "date_utc_start": date0,
                                             "targets": {"best_min": _auto_targets.BEST_MIN, "gain_if": _auto_targets.GAIN_IF,
                                                         "gain_min": _auto_targets.GAIN_MIN}})
    print_table(summary, rows, args, ["auto"] + variants)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"results: {d}/runs.csv, {d}/summary.csv, {d}/meta.json, {d}/autolog/")
    return 0


def _r(v):
    return "-" if v is None else f"{v:.2f}"


def print_table(summary, rows, args, autos):
    print()
    print(f"auto against glibc and the best fixed algorithm (chosen after the fact), {args.reps} rounds; throughput / "
          f"glibc's in the same round, median [min-max]; auto/best: auto / the best's throughput in the same round")
    for a in autos:
        if a != "auto":
            print(f"{a}: auto with {', '.join(f'{k}={v}' for k, v in args.variants[a].items())}")
    print(f"{'program':<10} {'T':>3}  {'best fixed':<22} {'':<16} {'/ glibc':>18}  {'/ best':>18}  switches  "
          f"targets (best, glibc, gain)")
    for s in summary:
        held = " (held out)" if s["program"] in HELD_OUT else ""
        best = f"{s['best']} {_r(s['best_median'])}" if s["best"] else "-"
        for i, a in enumerate(autos):
            sw = [r.get("auto_switches") for r in rows if r["program"] == s["program"] and
                  r["threads"] == s["threads"] and r["algorithm"] == a and r.get("auto_switches") not in (None, "")]
            vg = f"{_r(s[a + '_median'])} [{_r(s[a + '_min'])}-{_r(s[a + '_max'])}]"
            vb = f"{_r(s[a + '_vs_best_median'])} [{_r(s[a + '_vs_best_min'])}-{_r(s[a + '_vs_best_max'])}]"
            head = f"{s['program']:<10} {s['threads']:>3}  {best:<22}" if i == 0 else " " * 37
            tg = f"{s['target_best']}, {s['target_glibc']}, {s['target_gain']}{held}" if a == "auto" else ""
            print(f"{head} {a:<16} {vg:>18}  {vb:>18}  {_auto_targets.median(sw) if sw else 0:>8}  {tg}")
