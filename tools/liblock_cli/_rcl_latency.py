"""`liblock bench rcl-latency`: the round trip of a delegated critical
section (RCL, bench/rcl_latency.c) against the ping-pong probe of
bench/probe.h, for one or more builds run interleaved.

One run is `BUILD/bin/rcl_latency -f -r 5 -n 100000 -t 1` (the latency part:
client on CPU 0, server on CPU 1, 5 rounds of 100,000 empty and 100,000
5-line critical sections, each round between two probes; -t 1 keeps its
throughput part to 1 ms per point).  Its result is the median over its
rounds of (ns per critical section) / (mean of the round's two probes),
and the median probe.  A repetition runs every build once, in an order
rotated by one each repetition (A B C, B C A, ...), so that the machine's
drift and its probe regimes hit every build alike.  A run is put in the
regime of its median probe (fast < 44 ns <= normal < 146 ns <= slow, as
every `liblock bench` experiment); medians are per build and regime.

  liblock bench rcl-latency                      this build, 9 repetitions
  liblock bench rcl-latency --builds OLD,NEW     two build directories, interleaved
"""
import os
import re
import statistics
import subprocess
import sys

from . import _runner

LINE = re.compile(r"median: probe ([\d.]+) ns, empty CS ([\d.]+) ns = ([\d.]+)x probe \(min ([\d.]+), max ([\d.]+)\), "
                  r"5-line CS ([\d.]+) ns = ([\d.]+)x probe")
FIELDS = ["rep", "build", "status", "probe_ns", "regime", "empty_ns", "empty_ratio", "empty_ratio_min",
          "empty_ratio_max", "five_ns", "five_ratio", "error"]


def add_arguments(sub, common):
    sp = sub.add_parser("rcl-latency",
                        help="RCL round trip (empty and 5-line delegated CS) / ping-pong probe, builds interleaved")
    common(sp, reps=9)
    sp.add_argument("--builds", default="",
                    help="comma-separated build directories to compare, run interleaved (default: this build)")
    sp.add_argument("--args", default="-f -r 5 -n 100000 -t 1",
                    help="rcl_latency options of every run (default '-f -r 5 -n 100000 -t 1')")


def _label(path, taken):
    parts = [p for p in os.path.abspath(path).split(os.sep) if p]
    name = "/".join(parts[-2:]) if len(parts) >= 2 else path
    while name in taken:
        name += "'"
    return name


def run(args, env):
    builds = [b for b in args.builds.split(",") if b] or [os.path.dirname(env.bindir)]
    progs, labels = [], []
    for b in builds:
        p = os.path.join(b, "bin", "rcl_latency")
        if not os.path.exists(p):
            raise SystemExit(f"liblock bench rcl-latency: {p} is missing (build it with `make` there)")
        progs.append(p)
        labels.append(_label(b, labels))
    d = _runner.out_dir(env, "rcl-latency", args.out)
    extra = args.args.split()
    n = len(progs)
    print(f"liblock bench rcl-latency: {n} build(s) x {args.reps} repetitions, interleaved; "
          f"rcl_latency {' '.join(extra)}; results in {d}", file=sys.stderr)
    rows = []
    for rep in range(args.reps):
        for k in range(n):
            i = (rep + k) % n
            row = {"rep": rep, "build": labels[i], "status": "ok", "error": ""}
            try:
                p = subprocess.run([progs[i]] + extra, capture_output=True, text=True, timeout=120 + args.timeout)
                out = p.stdout
            except subprocess.TimeoutExpired:
                out, row["status"], row["error"] = "", "timeout", "killed"
            m = LINE.search(out)
            if m:
                probe, e, er, emin, emax, f, fr = (float(x) for x in m.groups())
                row.update(probe_ns=probe, regime=_runner.regime_of(probe, args.regime_bounds), empty_ns=e,
                           empty_ratio=er, empty_ratio_min=emin, empty_ratio_max=emax, five_ns=f, five_ratio=fr)
            elif row["status"] == "ok":
                row["status"] = "error"
                row["error"] = (p.stderr.strip().splitlines() or ["no median line"])[-1]
            rows.append(row)
            if not args.quiet:
                if row["status"] == "ok":
                    print(f"  rep {rep}  {row['build']:24} probe {row['probe_ns']:6.1f} ns ({row['regime']:6})  "
                          f"empty {row['empty_ns']:6.1f} ns = {row['empty_ratio']:.2f}x  "
                          f"5-line {row['five_ns']:6.1f} ns = {row['five_ratio']:.2f}x", file=sys.stderr)
                else:
                    print(f"  rep {rep}  {row['build']:24} {row['status']}: {row['error']}", file=sys.stderr)
    _runner.write_csv(os.path.join(d, "runs.csv"), rows, FIELDS)
    _runner.write_meta(d, env, args, {"builds": [os.path.abspath(b) for b in builds], "rcl_latency_args": args.args})
    print(f"rcl-latency: medians per build and regime (ratio = ns per CS / probe of the same run; "
          f"load {open('/proc/loadavg').read().split()[0] if os.path.exists('/proc/loadavg') else '?'})")
    print(f"{'regime':7} {'build':24} {'runs':>4}  {'probe ns':>8}  {'empty/probe':>11}  {'[min-max]':>11}  "
          f"{'5-line/probe':>12}  {'empty ns':>8}")
    ok = [r for r in rows if r["status"] == "ok"]
    for reg in _runner.REGIME_NAMES:
        for lab in labels:
            v = [r for r in ok if r["regime"] == reg and r["build"] == lab]
            if not v:
                continue
            er = [r["empty_ratio"] for r in v]
            print(f"{reg:7} {lab:24} {len(v):4}  {statistics.median(r['probe_ns'] for r in v):8.1f}  "
                  f"{statistics.median(er):10.3f}x  [{min(er):.2f}-{max(er):.2f}]  "
                  f"{statistics.median(r['five_ratio'] for r in v):11.3f}x  "
                  f"{statistics.median(r['empty_ns'] for r in v):8.1f}")
    bad = len(rows) - len(ok)
    if bad:
        print(f"({bad} run(s) failed: see {os.path.join(d, 'runs.csv')})")
    return 0 if ok else 1
