"""`liblock bench EXPERIMENT`: run a named experiment, write its results
under results/ as CSV (runs.csv: one row per run; summary.csv: medians with
min/max and ratios within a probe regime), draw PNG plots, print a table.

Experiments (docs/bench.md, BENCHMARKS.md):
  contention   lockbench: latency per CS vs delay, every algorithm, 1 and 5 lines (thesis Fig. 5.2)
  threads      lockbench: throughput vs number of threads (oversubscription on small machines)
  headline     lockbench at high and low contention, 1 and 5 lines, ratios vs posix (`make demo`)
  latency-map  pointer-chasing read latency by where the line sits (L1/L2/LLC/DRAM, other core)
  store-cas    cost of a store and of a CAS on one shared line vs contending threads
  null-rpc     round trip of a null RPC between two pinned threads, flags in one line vs two
  multi-rpc    many clients claim one server slot by CAS (TAS vs TTAS), client delay sweep
  cost-model   local locking vs delegation over a (shared lines, context lines) grid, break-even
  oversubscription  every algorithm, default policy, 8 and 32 threads: throughput vs posix, FIFO
               hand-off vs the wake-up probe, the oversubscription targets
  apps         real programs (C++ bounded buffer, Python queue.Queue, sqlite3) under the interposer,
               time / glibc's
  rcl-latency  RCL round trip / ping-pong probe (bench/rcl_latency), one or more builds interleaved
  malthus      the Malthusian-locks workloads (bench/malthus): Figure 4 table, thread sweep
               (`liblock malthus` is the old spelling of the same command)
  startup      what the interposer adds to a process's start: /bin/true and a shell loop of 200 /bin/true,
               plain vs interposed (warm: figures handed down; cold: no cache), medians
  manycore     many cores on one lock, in a time budget (8 min): the contention sweep at 2..N threads and
               memcached Get/Set at 1..N-1 workers (glibc, best lock, transformed on rcl); --plan N
  report       regenerate BENCHMARKS.md: every section's benchmark, reduced to bench/report/*.csv
               (`make benchmarks`; --only, --from-csv, --quick); with DIR...: print the tables of
               oversubscription / apps results directories
"""
import os
import sys

from . import _malthus
from . import _runner

HELP = "run a benchmark experiment; results under results/ as CSV + PNG plots"

THESIS_DELAYS = "100,300,1000,3000,10000,30000,100000,300000,1000000,2000000"


def add_arguments(p):
    sub = p.add_subparsers(dest="experiment", metavar="EXPERIMENT")
    p.set_defaults(experiment=None)

    def common(sp, reps=5, unused=()):
        """The options every experiment takes; those named in unused stay
        accepted and say that this experiment does not use them."""
        sp.add_argument("--reps", type=int, default=reps, help=f"repetitions per point (default {reps})")
        sp.add_argument("--out", help="output directory (default results/EXPERIMENT-DATE)")
        sp.add_argument("--no-plot", action="store_true", help="skip the PNG plots")
        sp.add_argument("--quiet", action="store_true", help="no progress display")
        sp.add_argument("--probe-tolerance", type=float, default=1.5,
                        help="a run whose before/after probes differ by more than this factor is left out (default 1.5)")
        sp.add_argument("--regimes", default="44,146",
                        help="probe regime boundaries in ns: fast < A <= normal < B <= slow (default 44,146)")
        sp.add_argument("--timeout", type=float, default=10.0, help="time bound of each run past its end (s, default 10)")
        for act in sp._actions:
            if act.dest in unused:
                act.help = "not used by this experiment"

    def lockbench_opts(sp, delays, lines, duration):
        sp.add_argument("--algorithms", default="all", help="comma-separated names, or 'all' (default)")
        sp.add_argument("--baseline", default="posix", help="ratios are against this algorithm (default posix)")
        sp.add_argument("--delays", default=delays, help=f"delays between CSs, cycles (default {delays})")
        sp.add_argument("--lines", default=lines, help=f"shared lines per CS, comma-separated (default {lines})")
        sp.add_argument("--context", type=int, default=0, help="context lines per thread (default 0)")
        sp.add_argument("--duration", type=float, default=duration, help=f"seconds per run (default {duration})")
        sp.add_argument("--count", type=int, default=0, help="fixed-count mode: CSs per thread instead of --duration")
        sp.add_argument("--wait", help="waiting policy for every algorithm (default: each algorithm's own)")
        sp.add_argument("--convention", default="auto", choices=["auto", "server", "all"],
                        help="delegation convention (default auto: server for delegating algorithms)")
        sp.add_argument("--pin", default="rr", choices=["rr", "none"])

    ncpu = os.cpu_count() or 1
    sp = sub.add_parser("contention", help="latency vs delay per algorithm, 1 and 5 lines (thesis Fig. 5.2)")
    common(sp)
    lockbench_opts(sp, THESIS_DELAYS, "1,5", 0.3)
    sp.add_argument("--threads", type=int, default=ncpu, help=f"threads (default: CPUs = {ncpu})")

    sp = sub.add_parser("threads", help="throughput vs threads (oversubscription)")
    common(sp)
    lockbench_opts(sp, "100", "1", 0.3)
    sp.add_argument("--threads-list", default="1,2,4,8,16,32,64", help="thread counts (default 1,2,4,8,16,32,64)")

    sp = sub.add_parser("headline", help="every algorithm, high/low contention, 1 and 5 lines, ratios vs posix")
    common(sp)
    lockbench_opts(sp, "100,2000000", "1,5", 0.0)
    sp.add_argument("--threads", type=int, default=ncpu, help=f"threads (default: CPUs = {ncpu})")
    sp.add_argument("--budget", type=float, default=150.0,
                    help="seconds the whole experiment should take; sets --duration when it is 0 (default 150)")

    sp = sub.add_parser("latency-map", help="read latency by where the line sits (heat map)")
    common(sp, reps=5)
    sp.add_argument("--sizes", default="16K,256K,4M,32M,128M", help="working-set sizes (default 16K,256K,4M,32M,128M)")
    sp.add_argument("--cpus", default="", help="CPUs to map (default all, at most 8)")

    sp = sub.add_parser("store-cas", help="store and CAS on one shared line vs contending threads")
    common(sp)
    sp.add_argument("--threads-list", default="", help="contending thread counts (default 1..CPUs, then 2x,4x CPUs)")

    sp = sub.add_parser("null-rpc", help="null RPC round trip: flags in one line vs separate lines")
    common(sp)

    sp = sub.add_parser("multi-rpc", help="clients claim one server slot (TAS vs TTAS), client delay sweep")
    common(sp)
    sp.add_argument("--clients", type=int, default=0, help="client threads (default: CPUs-1, at least 1)")
    sp.add_argument("--delays", default="0,100,300,1000,3000,10000,30000", help="client delay after each RPC, cycles")

    sp = sub.add_parser("cost-model", help="local locking vs delegation over (shared, context) lines, "
                        "with the fitted break-even line")
    common(sp)
    sp.add_argument("--shared", default="0,5,10,20,40,80",
                    help="shared lines (default 0,5,10,20,40,80; a context row where delegation never wins is "
                         "re-measured with the largest count doubled, up to 3 times; run length comes from a "
                         "100 s budget, see docs/bench.md)")
    sp.add_argument("--context", default="0,2,5,10,20", help="context lines (default 0,2,5,10,20)")
    sp.add_argument("--delays", default="0,300,1000,3000", help="client delays swept for the peak (cycles)")

    from . import _oversub, _apps, _auto_bench, _report, _delegation, _rcl_latency, _startup, _manycore
    sp = sub.add_parser("malthus", help=_malthus.HELP + " (also `liblock malthus`)",
                        description=_malthus.HELP + "; `liblock malthus` is the same command")
    _malthus.add_arguments(sp)
    _oversub.add_arguments(sub, common)
    _rcl_latency.add_arguments(sub, common)
    _startup.add_arguments(sub, common)
    _apps.add_arguments(sub, common)
    _auto_bench.add_arguments(sub, common)
    _delegation.add_arguments(sub, common)
    _manycore.add_arguments(sub, common)
    _report.add_arguments(sub)


def run(args, env):
    if not args.experiment:
        print("liblock bench: name an experiment: contention, threads, headline, latency-map, store-cas, "
              "null-rpc, multi-rpc, cost-model, oversubscription, apps, auto, delegation, rcl-latency, startup, manycore, malthus, report (see `liblock bench -h`)",
              file=sys.stderr)
        return 2
    if args.experiment == "report":
        from . import _report
        return _report.run(args, env)
    if args.experiment == "malthus":  # its own --reps and no probe regimes
        return _malthus.run(args, env)
    if args.reps < 1:
        print(f"liblock bench: --reps must be at least 1, not {args.reps}", file=sys.stderr)
        return 2
    try:
        a, b = (float(x) for x in args.regimes.split(","))
        assert 0 < a < b
    except (ValueError, AssertionError):
        print(f"liblock bench: --regimes must be two increasing numbers of ns, not '{args.regimes}'", file=sys.stderr)
        return 2
    args.regime_bounds = (a, b)
    if args.experiment == "oversubscription":
        from . import _oversub
        return _oversub.run(args, env)
    if args.experiment == "delegation":
        from . import _delegation
        return _delegation.run(args, env)
    if args.experiment == "rcl-latency":
        from . import _rcl_latency
        return _rcl_latency.run(args, env)
    if args.experiment == "startup":
        from . import _startup
        return _startup.run(args, env)
    if args.experiment == "apps":
        from . import _apps
        return _apps.run(args, env)
    if args.experiment == "auto":
        from . import _auto_bench
        return _auto_bench.run(args, env)
    if args.experiment == "manycore":
        from . import _manycore
        return _manycore.run(args, env)
    if args.experiment in ("contention", "threads", "headline"):
        from . import _lockexp
        return _lockexp.run(args, env)
    from . import _charexp
    return _charexp.run(args, env)
