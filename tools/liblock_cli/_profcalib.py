"""`liblock profile --calibrate`: the two thresholds of the advice, measured
with lockbench on this machine (the method of Lozi's RCL thesis, UPMC 2014,
sections 4.2.1 and 5.3.1; docs/profile.md,
"Thresholds").

lockbench runs T = (CPUs) threads doing critical sections on one lock that
touch one shared line, with a busy delay of d cycles between two critical
sections, for a sweep of d, every lock interleaved (posix, rcl and a few
others), repeated, with the probe (docs/bench.md).  For every point:

  cost(lock, d)  = (d + mean cycles per critical section incl. acquisition)
                   / workers: cycles of the machine per critical section at
                   equal hardware threads (RCL gives one CPU to its server, so
                   it has one worker fewer);
  share(d)       = lat / (lat + d) for posix: the share of a thread's time in
                   critical sections incl. acquire and release, which is what
                   `liblock profile` reports for a program on glibc's mutex.

lower: posix has collapsed where its cycles per critical section are at least
       COLLAPSE x its best over the sweep; the lower threshold is share(d) at
       the largest d of the collapsed run that starts at the highest
       contention (the smallest d);
upper: share(d) at the largest d such that at every d' <= d, rcl's cost is
       below every other lock's; null when rcl did not win at the highest
       contention.
Both use medians over the repetitions of the dominant probe regime.
"""
import os
import platform
import socket
import statistics
import sys

from . import _runner
from ._profadvice import FORMAT, now_utc

DELAYS = (100, 300, 1000, 3000, 10000, 30000, 100000, 300000)
LOCKS = ("posix", "rcl", "mcs", "ttas", "cc-synch")
# more threads than CPUs (the advice for an oversubscribed program): the
# concurrency-restricting locks against posix and a parking queue lock, at
# the two highest contentions, with OVERSUB_FACTOR x CPUs threads
OVERSUB_LOCKS = ("posix", "mcscr", "loiter", "mcs")
OVERSUB_DELAYS = (100, 1000)
OVERSUB_FACTOR = 4
COLLAPSE = 2.0
DELEGATING = ("cc-synch", "dsm-synch", "flat-combining", "oyama")  # combine only through liblock_execute


def _cmd(env, algo, threads, delay, duration, label):
    cmd = [env.program("lockbench"), "-a", algo, "-t", str(threads), "-d", str(delay), "-k", "1",
           "-D", f"{duration:g}", "-T", "10", "-l", label, "-f", "json"]
    if threads > (os.cpu_count() or 1) and algo != "posix":
        cmd += ["-w", "spin-then-park"]  # more threads than CPUs: waiters must park (docs/api.md)
    return cmd


def sweep(env, locks, delays, reps, duration, threads, quiet=False):
    order = _runner.interleave([(d,) for d in delays], list(locks), reps)
    prog = _runner.Progress(len(order), quiet)
    rows = []
    for rep, (d,), algo in order:
        for rec in _runner.run_program(_cmd(env, algo, threads, d, duration, f"calib{rep}"), duration + 30):
            rec["threads"] = threads
            rec.setdefault("algorithm", algo)
            rec["delay_cycles"] = d
            rec["rep"] = rep
            _runner.classify(rec, 1.5, _runner.DEFAULT_REGIME_BOUNDS)
            rows.append(rec)
        prog.step(f"{algo} d={d} rep {rep + 1}/{reps}")
    return rows


def _median(vals):
    vals = [v for v in vals if isinstance(v, (int, float))]
    return statistics.median(vals) if vals else None


def derive(rows, locks, delays):
    """Thresholds from the sweep's rows (pure: tests call it on fixed rows)."""
    regime = _runner.dominant_regime(rows)
    use = [r for r in rows if r.get("status") == "ok" and r.get("check", "ok") == "ok"
           and (regime is None or (r.get("probe_agree") and r.get("regime") == regime))]
    points = []
    table = {}
    for d in delays:
        for a in locks:
            rs = [r for r in use if r.get("algorithm") == a and r.get("delay_cycles") == d]
            lat = _median([r.get("lat_cycles_mean") for r in rs])
            workers = _median([r.get("workers") for r in rs])
            if lat is None or not workers:
                continue
            cost = (d + lat) / workers
            table[(a, d)] = (lat, cost)
            points.append({"algorithm": a, "delay_cycles": d, "runs": len(rs), "lat_cycles_mean": round(lat, 1),
                           "workers": workers, "cycles_per_cs": round(cost, 1),
                           "share": round(lat / (lat + d), 4) if a == "posix" else None})
    pd = [d for d in delays if ("posix", d) in table]
    if not pd:
        raise SystemExit("liblock profile --calibrate: no usable posix run (see the runs above)")
    share = {d: table[("posix", d)][0] / (table[("posix", d)][0] + d) for d in pd}
    best = min(table[("posix", d)][0] for d in pd)
    lower_d = None
    for d in pd:                                  # from the highest contention down
        if table[("posix", d)][0] >= COLLAPSE * best:
            lower_d = d
        else:
            break
    collapsed = lower_d is not None
    if not collapsed:                             # never collapsed: everything measured is "below"
        lower_d = pd[0]
    upper_d = None
    for d in pd:
        if ("rcl", d) not in table:
            break
        rc = table[("rcl", d)][1]
        others = [table[(a, d)][1] for a in locks if a != "rcl" and (a, d) in table]
        if others and rc < min(others):
            upper_d = d
        else:
            break
    # the local lock to suggest between the thresholds: the geometric mean of
    # its cost relative to posix's over the collapsed region (the delays
    # where both were measured); posix itself unless one is below 1
    region = [d for d in pd if d <= lower_d]
    local = [a for a in locks if a not in ("rcl", "posix") + DELEGATING]
    best_local, best_val = "posix", 1.0
    for a in local:
        ratios = [table[(a, d)][1] / table[("posix", d)][1] for d in region if (a, d) in table]
        if not ratios:
            continue
        g = statistics.geometric_mean(ratios)
        if g < best_val:
            best_local, best_val = a, g
    probes = [r.get("probe_ns") for r in use if isinstance(r.get("probe_ns"), (int, float))]
    return {
        "format": FORMAT,
        "lower": round(share[lower_d], 4),
        "lower_delay_cycles": lower_d,
        "posix_collapsed": collapsed,
        "upper": round(share[upper_d], 4) if upper_d is not None else None,
        "upper_delay_cycles": upper_d,
        "best_local": best_local,
        "best_local_vs_posix": round(best_val, 3),
        "best_local_wait": None,
        "collapse_factor": COLLAPSE,
        "regime": regime,
        "probe_ns_median": round(statistics.median(probes), 1) if probes else None,
        "runs_used": len(use), "runs_total": len(rows),
        "points": points,
    }


def derive_oversub(rows, locks, delays):
    """The lock to advise for a program with more threads than CPUs: the one
    whose throughput relative to posix's, geometric mean over the delays, is
    highest and above 1; posix (keep) when none beat it."""
    regime = _runner.dominant_regime(rows)
    use = [r for r in rows if r.get("status") == "ok" and r.get("check", "ok") == "ok"
           and (regime is None or (r.get("probe_agree") and r.get("regime") == regime))]
    tput = {}
    for a in locks:
        for d in delays:
            v = _median([r.get("throughput_cs_per_s") for r in use if r.get("algorithm") == a
                         and r.get("delay_cycles") == d])
            if v:
                tput[(a, d)] = v
    best, best_val, points = "posix", 1.0, []
    for a in locks:
        ratios = [tput[(a, d)] / tput[("posix", d)] for d in delays if (a, d) in tput and ("posix", d) in tput]
        for d in delays:
            if (a, d) in tput:
                points.append({"algorithm": a, "delay_cycles": d, "throughput_cs_per_s": round(tput[(a, d)])})
        if a != "posix" and ratios:
            g = statistics.geometric_mean(ratios)
            if g > best_val:
                best, best_val = a, g
    return {"best_oversubscribed": best, "best_oversubscribed_wait": None if best == "posix" else "spin-then-park",
            "best_oversubscribed_vs_posix": round(best_val, 3), "oversub_regime": regime,
            "oversub_runs_used": len(use), "oversub_points": points}


def calibrate(env, args):
    reps = args.reps
    threads = os.cpu_count() or 2
    dur = args.duration
    locks = list(LOCKS)
    print(f"liblock profile --calibrate: lockbench, {threads} threads, 1 line, delays {','.join(map(str, DELAYS))} "
          f"cycles, locks {','.join(locks)}, {reps} interleaved repetitions of {dur:g} s", file=sys.stderr)
    load0 = _loadavg()
    if load0 is not None and load0 > threads:
        print(f"warning: load average {load0:.1f} on {threads} CPUs: other work will take the lock holders' CPUs "
              f"and make locks look collapsed; calibrate on a quiet machine", file=sys.stderr)
    rows = sweep(env, locks, DELAYS, reps, dur, threads)
    th = derive(rows, locks, DELAYS)
    over = OVERSUB_FACTOR * threads
    print(f"then {over} threads (more than the CPUs), delays {','.join(map(str, OVERSUB_DELAYS))}, locks "
          f"{','.join(OVERSUB_LOCKS)} (spin-then-park)", file=sys.stderr)
    orows = sweep(env, OVERSUB_LOCKS, OVERSUB_DELAYS, reps, dur, over)
    th.update(derive_oversub(orows, OVERSUB_LOCKS, OVERSUB_DELAYS))
    th["oversub_threads"] = over
    th["_rows"] = rows + orows  # written beside the thresholds by the caller, then dropped
    th.update({
        "date_utc": now_utc(),
        "machine": {"hostname": socket.gethostname(), "cpus": threads, "cpu_model": _cpu_model(rows),
                    "kernel": platform.release()},
        "command": f"liblock profile --calibrate --reps {reps} --duration {dur:g}",
        "threads": threads, "lines": 1, "delays_cycles": list(DELAYS), "locks": locks, "reps": reps,
        "duration_s": dur, "source": "calibrated", "loadavg_start": load0, "loadavg_end": _loadavg(),
    })
    return th


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_model(rows):
    for r in rows:
        if r.get("cpu_model"):
            return r["cpu_model"]
    return platform.processor() or None


def describe(th):
    lo = f"{100 * th['lower']:.1f}%"
    up = f"{100 * th['upper']:.1f}%" if th.get("upper") is not None else "none"
    if th.get("posix_collapsed", True):
        how = f"posix collapsed at delays <= {th.get('lower_delay_cycles')} cycles"
    else:
        how = (f"posix never collapsed: at the highest contention, delay {th.get('lower_delay_cycles')} cycles, "
               f"it cost under {th.get('collapse_factor', COLLAPSE):g}x its best; the threshold is its share there")
    if th.get("upper") is not None:
        uhow = f"rcl beat every lock at delays <= {th['upper_delay_cycles']} cycles"
    else:
        uhow = "rcl did not beat every lock at the highest contention"
    lines = [f"lower threshold {lo} ({how})", f"upper threshold {up} ({uhow})",
             f"best local lock where posix collapsed: {th.get('best_local')}; probe regime {th.get('regime')}, "
             f"median probe {th.get('probe_ns_median')} ns; {th.get('runs_used')}/{th.get('runs_total')} runs used"]
    if th.get("best_oversubscribed"):
        lines.append(f"with {th.get('oversub_threads')} threads: best lock {th['best_oversubscribed']} "
                     f"({th.get('best_oversubscribed_vs_posix')}x posix's throughput; posix itself when none beat it)")
        for p in th.get("oversub_points") or []:
            lines.append(f"  {p['algorithm']:>8} d={p['delay_cycles']:<6} {p['throughput_cs_per_s']:>12} CS/s")
    pts = th.get("points") or []
    if pts:
        locks = []
        for p in pts:
            if p["algorithm"] not in locks:
                locks.append(p["algorithm"])
        delays = sorted({p["delay_cycles"] for p in pts})
        idx = {(p["algorithm"], p["delay_cycles"]): p for p in pts}
        lines.append("machine cycles per critical section at equal hardware threads; last column: posix's share of time in critical sections:")
        lines.append(f"{'delay':>8}" + "".join(f"{a:>10}" for a in locks) + f"{'share':>9}")
        for d in delays:
            row = f"{d:>8}"
            for a in locks:
                p = idx.get((a, d))
                row += f"{p['cycles_per_cs']:>10.0f}" if p else f"{'-':>10}"
            s = idx.get(("posix", d))
            row += f"{100 * s['share']:>8.1f}%" if s and s.get("share") is not None else f"{'-':>9}"
            lines.append(row)
    return lines
