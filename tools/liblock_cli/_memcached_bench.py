"""memcslap Get and Set throughput of memcached (the setup of J.-P. Lozi,
"Towards More Scalable Mutual Exclusion for Multicore Architectures", PhD
thesis, UPMC (Paris 6), 2014, section 5.3.4, scaled to this machine): memcached with --mc-threads workers
(default: the CPUs), memcslap with 2x as many client threads on the same
machine; Get: each client thread loads then gets 30,000 keys, Set: 10,000
sets per client thread (the thesis's preloads of 30,000 and 10,000).

Configurations, interleaved in each round (order rotated), with the
wake-up/ping-pong probe at the start of each round:
  glibc           unmodified memcached, no interposer
  BEST            unmodified memcached under `liblock run --lock BEST`
  rcl             unmodified memcached under `liblock run --lock rcl` (lock/unlock are requests)
  tr-glibc        transformed memcached, no interposer (the transform's own cost)
  tr-rcl          transformed memcached under `--lock rcl` (the hot sections run on the server)
Reported: ops/s per run, and per round each configuration / glibc of the
same round (median over rounds, min-max)."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

from . import _runner
from . import _memcached

LINE = re.compile(r"Time to (get|set)\s+(\d+) keys by\s+(\d+) threads:\s+([\d.]+) seconds")


def configs(args):
    return [("glibc", "orig", None), (args.best, "orig", args.best), ("rcl", "orig", "rcl"),
            ("tr-glibc", "tr", None), ("tr-rcl", "tr", "rcl")]


def _wait_port(port, proc, secs=60.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < secs:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


# memcslap's work per client thread: sets, and keys loaded then read by every client (the thesis's preloads)
SET_PER_CLIENT, GET_PER_CLIENT = 10000, 30000


def memcslap_workloads(port, clients, set_per=SET_PER_CLIENT, get_per=GET_PER_CLIENT, timeout=180):
    """memcslap Set (set_per per client thread) then Get (get_per keys loaded
    once, then read by every client thread) against 127.0.0.1:port, each
    memcslap bounded at timeout seconds: {"set": ops/s, "get": ops/s} or an
    error string."""
    out = {}
    try:
        for test, per in (("set", set_per), ("get", get_per)):
            r = subprocess.run(["memcslap", "-s", f"127.0.0.1:{port}", "-t", test, "-c", str(clients),
                                "-e", str(per)], capture_output=True, text=True, timeout=timeout)
            m = [x for x in LINE.finditer(r.stdout + r.stderr) if x.group(1) == test]
            if r.returncode != 0 or not m or float(m[-1].group(4)) <= 0:
                return f"memcslap {test}: exit {r.returncode} {(r.stderr.strip().splitlines() or [''])[-1][:80]}"
            n, secs = int(m[-1].group(2)), float(m[-1].group(4))
            out[test] = round(n / secs, 1)
        return out
    except subprocess.TimeoutExpired:
        return f"memcslap past {timeout:.0f} s"


def mc_args(port, mc_threads):
    # -c: room for the 2 client threads per worker past memcached's default of 1024 connections
    return ["-p", str(port), "-U", "0", "-l", "127.0.0.1", "-u", "root", "-m", "256", "-t", str(mc_threads),
            "-c", str(max(1024, 4 * mc_threads + 64))]


def one_run(env, tree, lock, mc_threads, clients, port, set_per=SET_PER_CLIENT, get_per=GET_PER_CLIENT, timeout=180,
            identity=True):
    """{"get": ops/s, "set": ops/s} or an error string."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("LIBLOCK_") and k != "LD_PRELOAD"}
    if lock:
        e.update(LD_PRELOAD=env.lib("liblock-interpose.so"), LIBLOCK_LOCK=lock, LIBLOCK_STRICT="1")
        if identity:
            e["LIBLOCK_IDENTITY"] = "1"  # the sections of _memcached.LEAVE_OUT need it
    mc = subprocess.Popen([os.path.join(tree, "memcached"), *mc_args(port, mc_threads)], env=e,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if not _wait_port(port, mc):
            return "memcached did not start"
        return memcslap_workloads(port, clients, set_per, get_per, timeout)
    finally:
        try:
            os.killpg(mc.pid, signal.SIGTERM)
            mc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(mc.pid, signal.SIGKILL)
            except OSError:
                pass


def profile_workload(args, env, orig, d):
    """The untransformed memcached under `liblock profile --json` while
    memcslap runs the Set and the Get workloads of the benchmark, then
    SIGTERM to `liblock profile`, which passes it on: memcached's handler
    exits, and the profiler runtime writes its report at exit.  Returns the
    JSON's path (d/profile.json); the text report is d/profile.txt."""
    mc_threads = args.mc_threads or (os.cpu_count() or 2)
    clients = 2 * mc_threads
    port = 30000 + (os.getpid() + 7919) % 20000
    out, txt = os.path.join(d, "profile.json"), os.path.join(d, "profile.txt")
    e = {k: v for k, v in os.environ.items() if not k.startswith("LIBLOCK_") and k != "LD_PRELOAD"}
    e["LIBLOCK_BUILD"] = os.path.dirname(env.libdir)
    cmd = [sys.executable, os.path.join(env.root or "", "tools", "liblock"), "profile", "--json", out, "--",
           os.path.join(orig, "memcached"), *mc_args(port, mc_threads)]
    _memcached.log(f"profiling the untransformed memcached -t {mc_threads} under memcslap -c {clients} Set and Get "
          f"(liblock profile --json {out})")
    with open(txt, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.Popen(cmd, env=e, stdout=f, stderr=subprocess.STDOUT)
        try:
            res = memcslap_workloads(port, clients) if _wait_port(port, p) else "memcached did not start"
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
    if not isinstance(res, dict):
        raise SystemExit(f"liblock bench apps memcached: profile run: {res} (see {txt})")
    if not os.path.exists(out):
        raise SystemExit(f"liblock bench apps memcached: liblock profile wrote no {out} (exit {rc}; see {txt})")
    _memcached.log(f"profile: Set {res['set'] / 1e3:.1f}K ops/s, Get {res['get'] / 1e3:.1f}K ops/s under the profiler; "
          f"liblock profile exit {rc}")
    return out


def measure(args, env, trees, d, cfgs=None, points=None, work=(SET_PER_CLIENT, GET_PER_CLIENT), may_run=None,
            timeout=180):
    """`args.reps` rounds; in each, for each memcached worker count of points
    (default --mc-threads, or the CPUs), the probes, then every configuration
    of cfgs (default configs(args); (name, tree, lock)) once, order rotated by
    round; memcslap runs 2 client threads per worker with work = (sets, gets)
    per client thread.  may_run(workers), when given, is asked before each
    run; a run it refuses is not run (the time budget of `liblock bench
    manycore`).  Writes d/bench.csv after every round; returns (rows, runs not
    run)."""
    points = points or [args.mc_threads or (os.cpu_count() or 2)]
    cfgs = cfgs or configs(args)
    set_per, get_per = work
    rows = []
    not_run = 0
    port = 30000 + os.getpid() % 20000
    _memcached.log(f"memcslap: {args.reps} rounds x {len(cfgs)} configurations x memcached -t "
                   f"{','.join(map(str, points))}, memcslap -c 2 per worker thread, {set_per} sets and {get_per} "
                   f"gets per client thread")
    for rep in range(args.reps):
        for mc_threads in points:
            clients = 2 * mc_threads
            pr = None
            for i in range(len(cfgs)):
                name, tree, lock = cfgs[(i + rep) % len(cfgs)]
                if may_run is not None and not may_run(mc_threads):
                    not_run += 1
                    continue
                if pr is None:  # the probes of the round, once it runs
                    pr = _runner.probes(env)
                port += 1
                res = one_run(env, trees[tree], lock, mc_threads, clients, port, set_per, get_per, timeout,
                              _memcached.identity_on(args))
                row = {"rep": rep, "config": name, "tree": tree, "lock": lock or "glibc", "mc_threads": mc_threads,
                       "clients": clients, "set_per_client": set_per, "get_per_client": get_per, **pr}
                if isinstance(res, dict):
                    row.update(status="ok", get_ops=res["get"], set_ops=res["set"])
                else:
                    row.update(status="failed", error=res)
                    _memcached.log(f"  {name} -t {mc_threads} round {rep + 1}: {res}")
                rows.append(row)
        _runner.write_csv(os.path.join(d, "bench.csv"), rows,
                          ["rep", "mc_threads", "clients", "config", "status", "get_ops", "set_ops"])
    return rows, not_run


def ratios(rows, name, test, mc_threads=None):
    """The runs of configuration `name` (at mc_threads workers, or all):
    ops/s of `test` ("get" or "set") of the ok runs, and each one's ratio to
    glibc's ops/s of the same round (and worker count).  A dict: ops_median,
    ops_min, ops_max, ratio_median, ratio_min, ratio_max (None without
    runs), n, failed."""
    mine = [r for r in rows if r["config"] == name and (mc_threads is None or r["mc_threads"] == mc_threads)]
    vals = [r[f"{test}_ops"] for r in mine if r["status"] == "ok"]
    rs = []
    for r in mine:
        if r["status"] == "ok":
            g = [x for x in rows if x["rep"] == r["rep"] and x["mc_threads"] == r["mc_threads"]
                 and x["config"] == "glibc" and x["status"] == "ok"]
            if g:
                rs.append(r[f"{test}_ops"] / g[0][f"{test}_ops"])
    return {"ops_median": _med(vals), "ops_min": min(vals) if vals else None, "ops_max": max(vals) if vals else None,
            "ratio_median": _med(rs), "ratio_min": min(rs) if rs else None, "ratio_max": max(rs) if rs else None,
            "n": len(vals), "failed": sum(1 for r in mine if r["status"] != "ok")}


def _med(v):
    v = sorted(v)
    return None if not v else v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def print_table(rows, args, meta):
    names = [c[0] for c in configs(args)]
    desc = {"glibc": "unmodified, glibc", args.best: f"unmodified, interposed {args.best}",
            "rcl": "unmodified, interposed rcl", "tr-glibc": "transformed, glibc (liblock.so linked)",
            "tr-rcl": "transformed, interposed rcl"}
    pp = [r["probe_ns"] for r in rows if _runner._num(r.get("probe_ns"))]
    wk = [r["wake_ns"] for r in rows if _runner._num(r.get("wake_ns"))]
    print()
    print(f"memcslap throughput, {os.cpu_count()} CPUs, memcached -t {rows[0]['mc_threads'] if rows else '?'}, "
          f"memcslap -c {rows[0]['clients'] if rows else '?'}; {args.reps} interleaved rounds; ratio = ops/s / "
          f"glibc's in the same round, median [min-max]")
    if pp:
        print(f"probes per round: ping-pong {', '.join(f'{float(p):.0f}' for p in pp[::len(names)] or pp)} ns; "
              f"wake-up {', '.join(f'{float(w) / 1e3:.1f}' for w in wk[::len(names)] or wk)} us")
    print(f"{'configuration':<42} {'Get ops/s':>10} {'Get ratio':>20} {'Set ops/s':>10} {'Set ratio':>20}")
    summary = {}
    for n in names:
        cells = []
        for t in ("get", "set"):
            x = ratios(rows, n, t)
            m, rm, fails = x["ops_median"], x["ratio_median"], x["failed"]
            cells.append(f"{m / 1e3:.1f}K" if m else "-")
            cells.append((f"{rm:.2f} [{x['ratio_min']:.2f}-{x['ratio_max']:.2f}]" if rm else "-")
                         + (f" ({fails} failed)" if fails else ""))
            summary[f"{n}.{t}"] = {"ops_median": m, "ratio_median": rm, "failed": fails}
        print(f"{desc.get(n, n):<42} {cells[0]:>10} {cells[1]:>20} {cells[2]:>10} {cells[3]:>20}")
    meta["bench"] = summary
