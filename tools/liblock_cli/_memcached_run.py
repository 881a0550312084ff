"""Options and driver of `liblock bench apps memcached` (docs/memcached.md):
build (_memcached.py), memcached's own tests in each configuration, then
memcslap throughput (_memcached_bench.py)."""
import datetime
import json
import os
import signal
import subprocess
import sys
import time

from . import _memcached
from . import _memcached_bench
from . import _runner

# Locks whose call sites are transformed by default: the eight first by share of
# thread time in their critical sections cover the item, LRU, slab, global and
# per-thread stats locks (and the LRU maintainer's lock) - docs/memcached.md
TOP_LOCKS = 8

# (name, tree, lock, wait): the test-suite configurations
TEST_CONFIGS = [("orig-native", "orig", None, None), ("tr-native", "tr", None, None),
                ("tr-rcl", "tr", "rcl", None), ("tr-mcs", "tr", "mcs", "spin-then-park")]


def add_build_arguments(g, profile_default=None, profile_help="profile the untransformed memcached under memcslap "
                        "Set and Get now, results/.../profile.json"):
    """The options of _memcached.prepare(): the profile, the locks taken from
    it, the build directory, --rebuild (also `liblock bench manycore`)."""
    g.add_argument("--profile", default=profile_default,
                   help="a saved profiler JSON (`liblock profile --json`: locks[].call_sites[].site = FILE.c:LINE) "
                        f"whose top locks' call sites are transformed (default: {profile_help})")
    g.add_argument("--top-locks", type=int, default=TOP_LOCKS,
                   help=f"take the call sites of the locks ranked first by cs_share (default {TOP_LOCKS}; 0 = all)")
    g.add_argument("--build-dir", help="where the source and builds are cached (default BUILD/apps/memcached)")
    g.add_argument("--identity", choices=("on", "off"), default="on",
                   help="on (default): interposed runs set LIBLOCK_IDENTITY=1, so delegated sections run with their "
                        "caller's thread identity, and store_item/add_delta are transformed too; off: the runner's "
                        "identity, and those two are left out")
    g.add_argument("--rebuild", action="store_true",
                   help="transform and build the transformed tree again (it is rebuilt when the sites change)")


def add_arguments(sp):
    g = sp.add_argument_group("memcached (with the positional `memcached`)")
    add_build_arguments(g)
    g.add_argument("--tests", default="all",
                   help="memcached tests (t/NAME.t names, comma-separated; 'all' = every t/*.t plus sizes and "
                        "testapp; 'none' skips the suite)")
    g.add_argument("--test-timeout", type=float, default=300.0, help="seconds per test file (default 300)")
    g.add_argument("--configs", default=",".join(c[0] for c in TEST_CONFIGS),
                   help="test configurations (default all: " + ",".join(c[0] for c in TEST_CONFIGS) + ")")
    g.add_argument("--baseline-tests", metavar="TESTS_JSON",
                   help="take the untransformed (orig-native) results from this tests.json of an earlier run "
                        "instead of running them again")
    g.add_argument("--no-bench", action="store_true", help="skip the memcslap throughput measurement")
    g.add_argument("--mc-threads", type=int, default=0,
                   help="memcached worker threads (default: CPUs, the thesis's half machine scaled to 2 CPUs)")
    g.add_argument("--best", default="mcs", help="the interposed algorithm compared with rcl (default mcs)")


def test_names(tree, which):
    all_t = sorted(os.path.basename(p)[:-2] for p in os.listdir(os.path.join(tree, "t")) if p.endswith(".t"))
    if which == "none":
        return []
    if which == "all":
        return ["sizes", "testapp"] + all_t
    names = [x.strip() for x in which.split(",") if x.strip()]
    bad = [n for n in names if n not in all_t and n not in ("sizes", "testapp")]
    if bad:
        raise SystemExit(f"liblock bench apps memcached: unknown test(s) {', '.join(bad)} (t/*.t names)")
    return names


def lock_env(env, lock, wait, identity=True):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("LIBLOCK_", "MC_LIBLOCK_")) and k != "LD_PRELOAD"}
    if lock:
        e.update(MC_LIBLOCK_PRELOAD=env.lib("liblock-interpose.so"), MC_LIBLOCK_LOCK=lock)
        if wait:
            e["MC_LIBLOCK_WAIT"] = wait
        if identity:
            e["MC_LIBLOCK_IDENTITY"] = "1"
    return e


def run_test(tree, name, envd, timeout, logdir, cfg):
    """(status, seconds): pass, fail, timeout."""
    if name in ("sizes", "testapp"):
        # test drivers like prove: they run natively, and the memcached-debug
        # testapp starts runs interposed (the wrapper script reads MC_LIBLOCK_*)
        cmd = [f"./{name}"]
    else:
        cmd = ["prove", f"t/{name}.t"]
    t0 = time.monotonic()
    with open(os.path.join(logdir, f"{cfg}.{name}.log"), "w") as f:
        p = subprocess.Popen(cmd, cwd=tree, env=envd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _killpg(p)
            return "timeout", time.monotonic() - t0
        except BaseException:
            _killpg(p)
            raise
    # prove's memcached children are killed by the tests; make sure none is left behind
    _killpg(p)
    return ("pass" if rc == 0 else "fail"), time.monotonic() - t0


def _killpg(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def run_suite(args, env, trees, d):
    cfgs = [c for c in TEST_CONFIGS if c[0] in args.configs.split(",")]
    names = test_names(trees["orig"], args.tests)
    logdir = os.path.join(d, "test-logs")
    os.makedirs(logdir, exist_ok=True)
    results = {}
    required = None
    if args.baseline_tests:
        try:
            with open(args.baseline_tests) as f:
                base = json.load(f)["results"]["orig-native"]
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"liblock bench apps memcached: {args.baseline_tests}: no orig-native results ({e})")
        results["orig-native"] = base
        required = {n for n, r in base.items() if r["status"] == "pass" and n in names}
        cfgs = [c for c in cfgs if c[0] != "orig-native"]
    for cfg, tree, lock, wait in cfgs:
        envd = lock_env(env, lock, wait, _memcached.identity_on(args))
        res = {}
        todo = names if cfg == "orig-native" or required is None else [n for n in names if n in required]
        _memcached.log(f"memcached's tests, {cfg}: {len(todo)} test files")
        for n in todo:
            st, s = run_test(trees[tree], n, envd, args.test_timeout, logdir, cfg)
            res[n] = {"status": st, "seconds": round(s, 1)}
            if st != "pass":
                _memcached.log(f"  {cfg}: {n}: {st} ({s:.0f} s)")
        results[cfg] = res
        if cfg == "orig-native":
            required = {n for n, r in res.items() if r["status"] == "pass"}
        with open(os.path.join(d, "tests.json"), "w") as f:
            json.dump({"required": sorted(required or []), "results": results}, f, indent=1)
    return results, required


def run(args, env):
    if args.profile:
        _memcached.hot_sites(args.profile, args.top_locks)  # a bad profile fails before anything is fetched or built
    d = _runner.out_dir(env, "memcached", args.out)
    date0 = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    wd, orig, tr, report, version, sites, sel = _memcached.prepare(args, env, d, _memcached_bench.profile_workload)
    print_profile(args.profile, args.top_locks)
    n, _ = _memcached.summarise_report(report, sites)
    with open(os.path.join(d, "transform-report.json"), "w") as f:
        json.dump({"sections": report, "sites": sites, "only": sel["only"], "files": sel["files"],
                   "left_out": [{"site": e["site"], "function": e["function"], "reason": why}
                                for e, why in sel["left_out"]],
                   "unmatched": [{"site": s, "line": t} for s, t in sel["unmatched"]],
                   "foreign": sel["foreign"]}, f, indent=1)
    refused = [e for e in sel["sections"] if e["status"] == "refused"]
    print(f"{version}: {len(sites)} call sites of the top {args.top_locks or 'all'} locks of {args.profile} select "
          f"{len(sel['sections'])} sections in {', '.join(sel['files'])}: transformed {len(n['transformed'])}, "
          f"refused by the transform {len(refused)}, left out by this bench {len(sel['left_out'])}")
    for e in report:
        if e["status"] == "transformed":
            print(f"  transformed {e['site']:<18} {e['function']}() on {e['mutex']}"
                  + (" (waits)" if e.get("waits") else ""))
    for e in refused:
        print(f"  REFUSED     {e['site']:<18} {e['function']}(): {e['reason']}")
    for e in sel["sections"]:
        if e["status"] == "nested":
            print(f"  nested      {e['site']:<18} {e['function']}(): inside another transformed section, left as "
                  f"lock/unlock there")
    for e, why in sel["left_out"]:
        print(f"  LEFT OUT    {e['site']:<18} {e['function']}(): {why}")
    for s, text in sel["unmatched"]:
        print(f"  no section  {s:<18} `{text}` (a trylock, or a lock call inside a --wrapper's body, "
              f"which selects the wrapper's sections)")
    for s in sel["foreign"]:
        print(f"  not in the transformed files: {s}")
    meta = {"experiment": "memcached", "version": version, "profile": args.profile, "sites": sites,
            "only": sel["only"], "top_locks": args.top_locks,
            "wrappers": _memcached.WRAPPERS, "date_utc_start": date0, "ncpus": os.cpu_count(),
            "loadavg_start": open("/proc/loadavg").read().split()[:3]}
    rc = 0
    trees = {"orig": orig, "tr": tr}
    if args.tests != "none":
        results, required = run_suite(args, env, trees, d)
        rc |= print_tests(results, required)
        meta["tests"] = {c: {"pass": sum(1 for r in res.values() if r["status"] == "pass"), "run": len(res)}
                         for c, res in results.items()}
    if not args.no_bench:
        rows, _ = _memcached_bench.measure(args, env, trees, d)
        _memcached_bench.print_table(rows, args, meta)
    _runner.write_meta(d, env, args, meta)
    print(f"results: {d}")
    return rc


def print_tests(results, required):
    print()
    print("memcached's own tests (sizes, testapp, prove t/NAME.t one at a time):")
    bad = 0
    for cfg, res in results.items():
        p = sum(1 for r in res.values() if r["status"] == "pass")
        fails = [f"{n} ({r['status']})" for n, r in res.items() if r["status"] != "pass"]
        secs = sum(r["seconds"] for r in res.values())
        print(f"  {cfg:<12} {p}/{len(res)} pass, {secs:.0f} s" + (f"; not passing: {', '.join(fails)}" if fails else ""))
        if cfg != "orig-native" and required is not None:
            miss = [n for n in required if res.get(n, {}).get("status") != "pass"]
            bad |= bool(miss)
    if required is not None:
        print(f"  required: the {len(required)} that pass untransformed natively; "
              + ("every configuration passes them" if not bad else "SOME CONFIGURATION FAILS ONE"))
    return 1 if bad else 0


def print_profile(profile, top):
    """The ranking that drove the selection: lock site, share, acquisitions."""
    data = _memcached.load_profile(profile)
    ranked = _memcached.ranked_locks(data, 0)
    print()
    print(f"profile {profile}: locks by share of thread time in their critical sections "
          f"(the first {top or len(ranked)} selected)")
    print(f"  {'#':>2} {'lock site':<16} {'function':<30} {'count':>5} {'cs_share':>9} {'acquired':>9}  call sites")
    for i, lk in enumerate(ranked[:max(top, 0) + 4 if top > 0 else len(ranked)]):
        share = lk.get("cs_share")
        cs = [c.get("site") for c in lk.get("call_sites") or [] if isinstance(c, dict)]
        print(f"  {i + 1:>2} {str(lk.get('site')):<16} {str(lk.get('function'))[:30]:<30} {str(lk.get('count')):>5} "
              + (f"{share * 100:>8.3f}%" if isinstance(share, (int, float)) else f"{'-':>9}")
              + f" {str(lk.get('acquisitions', '-')):>9}  {', '.join(cs[:6])}{' ...' if len(cs) > 6 else ''}"
              + ("" if top <= 0 or i < top else "  (not selected)"))
