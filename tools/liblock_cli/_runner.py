"""Shared machinery of `liblock bench`: running benchmark programs under a
time bound, interleaving, probe regimes, medians and ratios, CSV files and a
progress display.  (The leading underscore keeps this module from being
taken as a subcommand.)

Measuring discipline (docs/bench.md, "How to measure"): every run carries a
ping-pong probe taken just before and just after it; a run whose two probes
differ by more than the tolerance is marked `probe_agree = 0` and left out
of medians and ratios; runs are grouped by probe regime and ratios are only
taken between runs of the same regime; the algorithms compared are run
interleaved (A B A B ...), not one after the other.
"""
import csv
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time

# Regime boundaries (ns of a CPU0<->CPU1 round trip).  On the development
# VMs the round trip sits near 65 ns, sometimes ~330 ns, rarely ~30 ns; the
# boundaries are the geometric means between those levels.
DEFAULT_REGIME_BOUNDS = (44.0, 146.0)
REGIME_NAMES = ("fast", "normal", "slow")


def regime_of(probe_ns, bounds=DEFAULT_REGIME_BOUNDS):
    if probe_ns is None or probe_ns <= 0:
        return "none"
    if probe_ns < bounds[0]:
        return REGIME_NAMES[0]
    if probe_ns < bounds[1]:
        return REGIME_NAMES[1]
    return REGIME_NAMES[2]


def classify(rec, tolerance, bounds):
    """Add probe, regime and probe_agree to a result record."""
    a = _num(rec.get("probe_before_ns"))
    b = _num(rec.get("probe_after_ns"))
    if a and b and a > 0 and b > 0:
        rec["probe_ns"] = round(math.sqrt(a * b), 1)
        rec["probe_agree"] = int(max(a, b) / min(a, b) <= tolerance and regime_of(a, bounds) == regime_of(b, bounds))
        rec["regime"] = regime_of(rec["probe_ns"], bounds) if rec["probe_agree"] else "mixed"
    else:
        rec["probe_ns"] = ""
        rec["probe_agree"] = 1  # one CPU, or probes switched off: nothing to disagree
        rec["regime"] = "none"
    return rec


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def parse_list(text, kind=float, name="list"):
    try:
        vals = [kind(float(x)) if kind is int else kind(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"liblock bench: bad {name} '{text}' (comma-separated numbers)")
    if not vals:
        raise SystemExit(f"liblock bench: empty {name}")
    return vals


class Progress:
    """One status line on a terminal (rewritten in place), a line every
    10% otherwise; with an estimate of the time left."""

    def __init__(self, total, quiet=False):
        self.total, self.done, self.t0 = total, 0, time.time()
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last_decile = -1

    def step(self, text):
        self.done += 1
        if self.quiet:
            return
        el = time.time() - self.t0
        eta = el / self.done * (self.total - self.done)
        msg = f"[{self.done:>4}/{self.total} {100 * self.done // self.total:>3}%] {text}  eta {fmt_secs(eta)}"
        if self.tty:
            sys.stderr.write("\r\033[K" + msg[:150])
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        else:
            dec = 10 * self.done // self.total
            if dec != self.last_decile:
                self.last_decile = dec
                print(msg, file=sys.stderr, flush=True)


def fmt_secs(s):
    s = int(s + 0.5)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def run_program(cmd, timeout_s, env=None):
    """Run one benchmark program (in env, else ours); returns the list of
    JSON records it printed.  A program killed by the outer bound yields one
    record with status 'timeout' (the program's own bound should have fired
    first)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as e:
        # keep what the program said before it was killed: its records and
        # its last line on stderr (the stage it was stuck in, say)
        out, err = (_text(x) for x in (e.stdout, e.stderr))
        last = (err.strip().splitlines() or [""])[-1]
        killed = {"status": "timeout", "error": f"killed after {timeout_s:.0f} s" + (f"; it said: {last}" if last else ""),
                  "check": "skipped"}
        return _records(out) + [killed]
    recs = _records(p.stdout)
    if not recs:
        err = (p.stderr.strip().splitlines() or ["no output"])[-1]
        recs = [{"status": "error", "error": f"exit {p.returncode}: {err}", "check": "skipped"}]
    return recs


def _text(x):
    if x is None:
        return ""
    return x.decode(errors="replace") if isinstance(x, bytes) else x


def _records(out):
    recs = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return recs


def interleave(points, algorithms, reps):
    """The run order: for each repetition, for each point, every algorithm
    once (rotated by one per repetition so no algorithm is always first)."""
    order = []
    n = len(algorithms)
    for rep in range(reps):
        for pt in points:
            for i in range(n):
                order.append((rep, pt, algorithms[(i + rep) % n]))
    return order


def write_csv(path, rows, first=()):
    keys = list(first)
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_val(r.get(k, "")) for k in keys})


def _csv_val(v):
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v


def med_min_max(vals):
    vals = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


def dominant_regime(rows):
    counts = {}
    for r in rows:
        if r.get("probe_agree") and r.get("status") == "ok":
            counts[r["regime"]] = counts.get(r["regime"], 0) + 1
    if not counts:
        return None
    return max(counts, key=counts.get)


def summarise(rows, keys, metrics, baseline=None, base_metric=None):
    """Group ok, probe-agreeing runs by keys + algorithm + regime; medians
    with min/max of each metric; ratio of base_metric against the baseline
    algorithm at the same point and in the same regime."""
    groups = {}
    excluded = {}
    for r in rows:
        gk = tuple(r.get(k) for k in keys) + (r.get("algorithm"), r.get("regime"))
        if r.get("status") != "ok" or not r.get("probe_agree"):
            ek = tuple(r.get(k) for k in keys) + (r.get("algorithm"),)
            excluded.setdefault(ek, []).append(r.get("status") if r.get("status") != "ok" else "probe-disagree")
            continue
        groups.setdefault(gk, []).append(r)
    out = []
    for gk, rs in groups.items():
        s = {k: v for k, v in zip(keys, gk)}
        s["algorithm"], s["regime"] = gk[-2], gk[-1]
        s["n"] = len(rs)
        s["probe_ns_median"] = med_min_max([_num(r.get("probe_ns")) for r in rs])[0]
        for m in metrics:
            md, mn, mx = med_min_max([_num(r.get(m)) for r in rs])
            s[m + "_median"], s[m + "_min"], s[m + "_max"] = md, mn, mx
        out.append(s)
    if baseline and base_metric:
        index = {tuple(s[k] for k in keys) + (s["algorithm"], s["regime"]): s for s in out}
        for s in out:
            b = index.get(tuple(s[k] for k in keys) + (baseline, s["regime"]))
            v = s.get(base_metric + "_median")
            s["ratio_vs_" + baseline] = round(v / b[base_metric + "_median"], 3) if b and v and b.get(base_metric + "_median") else ""
    for s in out:
        ek = tuple(s[k] for k in keys) + (s["algorithm"],)
        s["excluded"] = ";".join(sorted(set(excluded.get(ek, [])))) if ek in excluded else ""
    # points where every run of an algorithm was excluded (e.g. all timed out)
    seen = {tuple(s[k] for k in keys) + (s["algorithm"],) for s in out}
    for ek, why in excluded.items():
        if ek not in seen:
            s = {k: v for k, v in zip(keys, ek[:-1])}
            s.update(algorithm=ek[-1], regime="", n=0, excluded=";".join(sorted(set(why))))
            out.append(s)
    return out


def out_dir(env, experiment, given):
    if given:
        d = given
    else:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        d = os.path.join(env.results, f"{experiment}-{stamp}")
    os.makedirs(d, exist_ok=True)
    return d


def git_commit(env):
    if not env.root:
        return ""
    try:
        return subprocess.run(["git", "-C", env.root, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def write_meta(d, env, args, extra=None):
    meta = {
        "command": " ".join(["liblock", "bench"] + sys.argv[2:]),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(env),
        "loadavg": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else "",
    }
    meta.update(extra or {})
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


UNFILTERED = "unfiltered"


def unfiltered_summary(rows, keys, metrics):
    """When no run had agreeing probes (a loaded machine): medians over all
    ok runs, under the regime name 'unfiltered', so plots still show
    something; tables and plots say that these are not comparable."""
    tmp = []
    for r in rows:
        r2 = dict(r)
        r2["regime"], r2["probe_agree"] = UNFILTERED, 1
        tmp.append(r2)
    return [s for s in summarise(tmp, keys, metrics) if s.get("n")]


def probes(env):
    """Wake-up (cross, same CPU) and ping-pong probes, one quick measurement."""
    try:
        out = subprocess.run([env.program("wake_probe"), "-r", "1", "-n", "50"], capture_output=True, text=True,
                             timeout=30).stdout
        r = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {}
    a, b = _num(r.get("probe_before_ns")), _num(r.get("probe_after_ns"))
    pp = round((a * b) ** 0.5, 1) if a and b and a > 0 and b > 0 else ""
    return {"wake_ns": r.get("wake_cross_ns"), "wake_same_ns": r.get("wake_same_ns"), "probe_ns": pp}
