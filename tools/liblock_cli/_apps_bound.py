"""The hand-off bound of `liblock bench apps`: is each FIFO lock's
slowdown on a program explained by one wake-up per lock acquisition?

A strict FIFO lock hands the lock to the longest waiter, which with more
threads than CPUs is usually asleep: each acquisition then costs about one
wake-up (the wake-up probe), whatever the critical section.  For every FIFO
algorithm and (program, threads) point this runs the program once more, at
--count-scale of the work, with bench/lockcount preloaded in front of the
interposer, which counts the acquisitions (mutex locks, successful trylocks,
condition and semaphore waits -- each wait retakes the lock).  Reported:
acquisitions N, the run's wall time T and its slowdown T / glibc's time at
the same scale, the bound's slowdown N x W / glibc's time (W: the wake-up
probe, median of the rounds' probes) -- what one wake-up per acquisition
would cost -- and the time the lock adds per acquisition, (T - Tg) / N
with Tg glibc's time at the same scale, against W.  "explained":
(T - Tg) / N <= 2 W, the hand-off target of `liblock bench
oversubscription`: the lock adds no more than the wake-ups its order
forces.  (T / N <= 2 W would count the program's own work per
acquisition as lock time: a program that spends longer than two wake-ups
per acquisition under glibc too, such as Python's queue, would come out
"not explained" while running at glibc's speed.)  N counts
every acquisition, contended or not, so the bound is an upper one: a
program whose threads rarely meet is "explained" trivially (and slows
down little).  Written to bound.csv."""
import os
import statistics

from . import _runner

BOUND_FIELDS = ["app", "threads", "algorithm", "wait", "status", "acquisitions", "mutex_lock", "trylock_ok",
                "cond_waits", "sem_waits", "seconds", "glibc_seconds", "ratio_vs_glibc", "per_acq_ns", "wake_ns",
                "per_acq_over_wake", "excess_per_acq_ns", "excess_over_wake", "bound_ratio", "explained"]


def verdict(r):
    """(excess ns per acquisition, its ratio to W, explained 0/1), each None when a field is missing;
    from a bound.csv row (strings) or a fresh one."""
    def f(k):
        try:
            return float(r.get(k))
        except (TypeError, ValueError):
            return None
    s, g, n, w = f("seconds"), f("glibc_seconds"), f("acquisitions"), f("wake_ns")
    if not (s and g and n and w):
        return None, None, None
    ex = (s - g) * 1e9 / n
    return ex, ex / w, int(ex <= 2 * w)


def add_arguments(sp):
    sp.add_argument("--count-scale", type=float, default=0.2,
                    help="work of the counted runs of the FIFO locks (hand-off bound), relative to --scale "
                         "(default 0.2; 0 = no counted runs)")
    sp.add_argument("--count-bound", type=float, default=60.0,
                    help="time bound of one counted run, s (default 60)")


def parse_counts(err):
    """The lockcount line with the most acquisitions (a program may start
    helper processes that print their own)."""
    best = None
    for line in err.splitlines():
        if not line.startswith("lockcount:"):
            continue
        f = line.split()
        try:
            d = {f[i]: int(f[i + 1]) for i in range(1, len(f) - 1, 2)}
        except (ValueError, IndexError):
            continue
        tot = d.get("mutex_lock", 0) + d.get("trylock_ok", 0) + d.get("cond_waits", 0) + d.get("sem_waits", 0)
        if best is None or tot > best[0]:
            best = (tot, d)
    return best


def run(args, env, run_once, app_cmd, points, algos, reg, base_env, lib, rows, prog):
    """The counted runs; returns the bound rows (empty when disabled)."""
    if args.count_scale <= 0:
        return []
    cl = env.lib("liblock-lockcount.so")
    if not os.path.exists(cl):
        print(f"liblock bench apps: {cl} is missing (run `make`): no hand-off bound")
        return []
    fifo = [a for a in algos if "fifo" in reg[a]["properties"]]
    wakes = [_runner._num(r.get("wake_ns")) for r in rows if r["algorithm"] == "glibc" and _runner._num(r.get("wake_ns"))]
    wake = statistics.median(wakes) if wakes else None
    scale = args.scale * args.count_scale
    out = []
    for (app, t) in points:
        cmd = app_cmd(env, app, t, scale)
        st, g, _ = run_once(cmd, dict(base_env, LD_PRELOAD=cl), args.count_bound)
        gl = g if st == "ok" else None
        prog.step(f"{app} T={t} glibc counted")
        for algo in fifo:
            info = reg[algo]
            wait = args.wait if args.wait and args.wait in info["policies"] else None
            e = dict(base_env, LD_PRELOAD=f"{cl} {lib}", LIBLOCK_LOCK=algo, LIBLOCK_STRICT="1")
            if getattr(args, "cond", None):
                e["LIBLOCK_COND"] = args.cond
            if wait:
                e["LIBLOCK_WAIT"] = wait
            err = []
            st, s, _ = run_once(cmd, e, args.count_bound, err)
            row = {"app": app, "threads": t, "algorithm": algo, "wait": wait or info.get("default_policy", ""),
                   "status": st, "seconds": round(s, 4) if s else "", "glibc_seconds": round(gl, 4) if gl else "",
                   "wake_ns": round(wake, 1) if wake else ""}
            c = parse_counts(err[0] if err else "") if st == "ok" else None
            if c:
                n, d = c
                row.update(acquisitions=n, **{k: d.get(k, 0) for k in ("mutex_lock", "trylock_ok", "cond_waits",
                                                                        "sem_waits")})
                if n and s:
                    per = s * 1e9 / n
                    row["per_acq_ns"] = round(per, 1)
                    if wake:
                        row["per_acq_over_wake"] = round(per / wake, 3)
                        if gl:
                            row["bound_ratio"] = round(n * wake / 1e9 / gl, 2)
                            ex, exw, ok = verdict(row)
                            row.update(excess_per_acq_ns=round(ex, 1), excess_over_wake=round(exw, 3), explained=ok)
                if gl:
                    row["ratio_vs_glibc"] = round(s / gl, 2)
            out.append(row)
            prog.step(f"{app} T={t} {algo} counted" + ("" if st == "ok" else f" [{st}]"))
    return out


def print_table(brows, args):
    if not brows:
        return
    print()
    print(f"hand-off bound of the FIFO locks (counted runs at {args.scale * args.count_scale:g} x the work; "
          "N = lock acquisitions, T = wall time, W = wake-up probe; x glibc: T / glibc's time, bound: N x W / "
          "glibc's time; Tg: glibc's time; explained: (T-Tg)/N <= 2 W)")
    print(f"{'program':<8} {'thr':>3} {'algorithm':<15} {'N':>9} {'T (s)':>8} {'x glibc':>8} {'bound':>8} "
          f"{'T/N':>9} {'(T-Tg)/N':>9} {'/ W':>6}  verdict")
    for r in brows:
        if r["status"] != "ok" or "acquisitions" not in r:
            print(f"{r['app']:<8} {r['threads']:>3} {r['algorithm']:<15} {'-':>9} {'-':>8} {'-':>8} {'-':>8} "
                  f"{'-':>9} {'-':>8}  no count ({r['status']})")
            continue
        pa = r.get("per_acq_ns")
        pr = r.get("bound_ratio")
        xg = r.get("ratio_vs_glibc")
        ex, exw, ok = verdict(r)
        v = "" if ok is None else ("explained" if ok else "NOT explained: > 2 W")
        print(f"{r['app']:<8} {r['threads']:>3} {r['algorithm']:<15} {r['acquisitions']:>9} {r['seconds']:>8} "
              f"{(f'{xg:.1f}x' if xg else '-'):>8} {(f'{pr:.1f}x' if pr else '-'):>8} "
              f"{(f'{pa / 1e3:.1f}us' if pa else '-'):>9} {(f'{ex / 1e3:.1f}us' if ex is not None else '-'):>9} "
              f"{(f'{exw:.2f}' if exw is not None else '-'):>6}  {v}")
