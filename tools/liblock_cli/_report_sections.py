"""The sections of BENCHMARKS.md: for each, the benchmark commands `liblock
bench report` runs (full and --quick) and the reduction of their raw results
(in RESULTS/SECTION/) to the rows of the section's small CSV
(bench/report/SECTION.csv, _report_csv.py), which _report_render.py turns
into the section's table.

Every section whose table has one row per algorithm lists every algorithm
of the registry (`liblock list`) with its default waiting policy: the
commands run them all with no --wait, and reduce() fails when one is
missing, so a report never silently drops a lock.

A command is a list of argv lists run one after the other; "{liblock}" in
an argv stands for this `liblock` front end, "{bin}/NAME" for a program of
the build, "{out}" for the section's raw results directory."""
import csv
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

from . import _identity_bench
from . import _runner


class Section:
    def __init__(self, name, title, full, quick, reduce, needs=None):
        self.name, self.title = name, title
        self.full, self.quick = full, quick
        self.reduce = reduce
        self.needs = needs  # a function env -> None or a reason the section cannot run here

    def commands(self, quick):
        return self.quick if quick else self.full


class SectionError(Exception):
    pass


def _read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise SectionError(f"{path}: {e}")


def _f(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def _check_all(name, reg, have):
    missing = [a["name"] for a in reg if a["name"] not in have]
    if missing:
        raise SectionError(f"{name}: no result for {', '.join(missing)} (every algorithm of the registry belongs "
                           f"in the table)")


def _policy(reg, name):
    return next((a["default_policy"] for a in reg if a["name"] == name), "")


# ------------------------------------------------------------------ headline
HEADLINE_POINTS = {(100, 1): "high1", (2000000, 1): "low1", (100, 5): "high5", (2000000, 5): "low5"}


def reduce_headline(out, reg):
    summary = _read_csv(os.path.join(out, "summary.csv"))
    runs = _read_csv(os.path.join(out, "runs.csv"))
    dom = _runner.dominant_regime([dict(r, probe_agree=int(r.get("probe_agree") or 0)) for r in runs])
    rows = {a["name"]: {"algorithm": a["name"], "policy": a["default_policy"]} for a in reg}
    for s in summary:
        key = HEADLINE_POINTS.get((int(float(s["delay_cycles"])), int(s["lines"])))
        if key is None or s["algorithm"] not in rows:
            continue
        row = rows[s["algorithm"]]
        if s.get("regime") == dom and s.get("n") not in ("", "0"):
            row[key + "_cycles"] = _f(s["lat_cycles_mean_median"])
            row[key + "_ratio"] = _f(s.get("ratio_vs_posix"))
        elif key + "_cycles" not in row:
            row[key + "_note"] = s.get("excluded") or f"no {dom} run"
        if key + "_cycles" in row:
            row.pop(key + "_note", None)
    _check_all("headline", reg, {s["algorithm"] for s in summary})  # run; a cell may still say why it has no number
    fields = ["algorithm", "policy"] + [f"{p}_{m}" for p in HEADLINE_POINTS.values() for m in ("cycles", "ratio", "note")]
    return fields, list(rows.values())


# ------------------------------------------------------------------- threads
def reduce_threads(out, reg):
    summary = _read_csv(os.path.join(out, "summary.csv"))
    runs = _read_csv(os.path.join(out, "runs.csv"))
    dom = _runner.dominant_regime([dict(r, probe_agree=int(r.get("probe_agree") or 0)) for r in runs])
    ts = sorted({int(s["threads"]) for s in summary})
    rows = {a["name"]: {"algorithm": a["name"], "policy": a["default_policy"]} for a in reg}
    for s in summary:
        if s["algorithm"] not in rows:
            continue
        t = int(s["threads"])
        row = rows[s["algorithm"]]
        if s.get("regime") == dom and s.get("n") not in ("", "0"):
            row[f"t{t}_cs_per_s"] = _f(s.get("throughput_cs_per_s_median"))
            row[f"t{t}_ratio"] = _f(s.get("throughput_ratio_vs_posix"))
            row.pop(f"t{t}_note", None)
        elif f"t{t}_cs_per_s" not in row:
            row[f"t{t}_note"] = s.get("excluded") or f"no {dom} run"
    _check_all("threads", reg, {s["algorithm"] for s in summary})  # run; a cell may still say why it has no number
    return (["algorithm", "policy"] + [f"t{t}_{m}" for t in ts for m in ("cs_per_s", "ratio", "note")],
            list(rows.values()))


# ---------------------------------------------------------- oversubscription
def reduce_oversubscription(out, reg):
    summary = _read_csv(os.path.join(out, "summary.csv"))
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    ts = [int(t) for t in meta.get("threads", [])]
    rows = {}
    for s in summary:
        a = s["algorithm"]
        r = rows.setdefault(a, {"algorithm": a, "policy": s.get("wait") or _policy(reg, a), "fifo": s.get("fifo"),
                                "done": [], "meets": [], "why": []})
        t = int(s["threads"])
        r[f"t{t}_cs_per_s"] = _f(s.get("throughput_cs_per_s_median"))
        r[f"t{t}_ratio"] = 1.0 if a == meta.get("baseline") else _f(s.get("ratio_vs_baseline_median"))
        r[f"t{t}_handoff_wake"] = _f(s.get("handoff_over_wake_median"))
        r[f"t{t}_wake_ns"] = _f(s.get("wake_ns_median"))
        b = _f(s.get("alt_bound_median"))
        r[f"t{t}_bound"] = b if b is not None else _f(s.get("rpc_bound_median"))
        if _f(s.get("ceiling_ratio_median")) is not None:
            r["ceiling_ratio"] = _f(s.get("ceiling_ratio_median"))
        r["done"].append(f"{s.get('completed')}/{s.get('runs')}")
        r["meets"].append(s.get("meets", ""))
        if s.get("why"):
            r["why"].append(f"{t} thr: {s['why']}")
    for a, r in rows.items():
        r["completed"] = ", ".join(r.pop("done"))
        meets, why = r.pop("meets"), r.pop("why")
        if a == meta.get("baseline"):
            r["verdict"] = "baseline"
        elif meets and all(m == "1" for m in meets):
            r["verdict"] = "meets"
        elif any(m == "0" for m in meets):
            r["verdict"] = "misses (" + "; ".join(why) + ")"
        else:
            r["verdict"] = "unknown"
    _check_all("oversubscription", reg, rows)
    order = [a["name"] for a in reg]
    fields = ["algorithm", "policy", "fifo"] + [f"t{t}_{m}" for t in ts for m in ("cs_per_s", "ratio", "handoff_wake",
                                                                                   "bound", "wake_ns")]
    return fields + ["ceiling_ratio", "completed", "verdict"], [rows[a] for a in order]


# ---------------------------------------------------------------------- apps
def _apps_rows(out, reg, name, colname):
    summary = _read_csv(os.path.join(out, "summary.csv"))
    cols, rows = [], {"glibc": {"algorithm": "glibc", "policy": ""}}
    rows.update({a["name"]: {"algorithm": a["name"], "policy": a["default_policy"]} for a in reg})
    for s in summary:
        c = colname(s)
        if c not in cols:
            cols.append(c)
        a = s["algorithm"]
        if a not in rows:
            continue
        if a == "glibc":
            rows[a][c] = _f(s.get("glibc_seconds_median"))
        elif s.get("failed") not in ("", "0", None):
            rows[a][c] = f"FAILED {s['failed']}/{s['runs']}"
        else:
            m = _f(s.get("ratio_median"))
            rows[a][c] = "inf" if m is not None and m == float("inf") else m
        if a != "glibc" and s.get("wait"):
            rows[a]["policy"] = s["wait"]
    _check_all(name, reg, {a for a, r in rows.items() if len(r) > 2})
    return cols, rows


def reduce_apps(out, reg):
    cols, rows = _apps_rows(out, reg, "apps", lambda s: f"{s['app']}_{s['threads']}")
    return ["algorithm", "policy"] + cols, [rows["glibc"]] + [rows[a["name"]] for a in reg]


def reduce_auto(out, reg):
    """One row per (program, threads) and configuration of auto (auto
    itself, then each --variant) of `liblock bench auto`'s summary, in its
    order; every fixed algorithm of the registry must have run."""
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    _check_all("auto", reg, set(meta.get("fixed", [])) | {"auto"})
    held = set(meta.get("held_out", []))
    autos = ["auto"] + list(meta.get("variants") or {})
    runs = _read_csv(os.path.join(out, "runs.csv"))
    rows = []
    for s in _read_csv(os.path.join(out, "summary.csv")):
        for a in autos:
            sw = [_f(r.get("auto_switches")) for r in runs if r["program"] == s["program"] and r["threads"] ==
                  s["threads"] and r["algorithm"] == a and _f(r.get("auto_switches")) is not None]
            row = {"point": f"{s['program']}_{s['threads']}_{a}", "program": s["program"], "threads": s["threads"],
                   "config": a, "held_out": int(s["program"] in held), "glibc": _f(s["glibc_throughput"]),
                   "best": s["best"], "best_ratio": _f(s["best_median"]), "switches": _median(sw) if sw else 0}
            for k in ("median", "min", "max", "vs_best_median", "vs_best_min", "vs_best_max"):
                row[k] = _f(s.get(f"{a}_{k}"))
            for k in ("target_best", "target_glibc", "target_gain"):
                row[k] = s[k] if a == "auto" else ""
            rows.append(row)
    if not rows:
        raise SectionError(f"auto: no summary rows in {out}")
    return list(rows[0]), rows


def reduce_condvars(out, reg):
    merged = {}
    cols = []
    for kind in ("fifo", "glibc"):
        c, rows = _apps_rows(os.path.join(out, kind), reg, "condvars", lambda s, k=kind: f"{k}_{s['threads']}")
        cols += c
        for a, r in rows.items():
            merged.setdefault(a, {}).update(r)
    return ["algorithm", "policy"] + cols, [merged[a["name"]] for a in reg]


# ---------------------------------------------------------------- interposer
PAIR = re.compile(r"^(\S+)(?:\s+\(2 threads\))?\s+glibc\s+([\d.]+) ns \(([\d.]+)-([\d.]+)\)\s+interposed\s+([\d.]+) ns \(([\d.]+)-([\d.]+)\)"
                  r"\s+ratio ([\d.]+)")


def reduce_interposer(out, reg):
    """Four interpose_overhead runs: -0 the default (lazy engagement), -1 with -e (every mutex engaged), -2 and -3
    the same with -m (a second thread alive: glibc's atomic path)."""
    rows = {}
    runs = ((0, "lazy"), (1, "engaged"), (2, "lazy_mt"), (3, "engaged_mt"))
    for i, _ in runs:
        if not os.path.exists(os.path.join(out, f"interpose_overhead-{i}.log")):
            raise SectionError(f"interposer: {os.path.join(out, f'interpose_overhead-{i}.log')} missing")
    for i, kind in runs:
        log = os.path.join(out, f"interpose_overhead-{i}.log")
        seen = set()
        with open(log) as f:
            for line in f:
                m = PAIR.match(line.strip())
                if m:
                    a = m.group(1)
                    seen.add(a)
                    r = rows.setdefault(a, {"algorithm": a, "policy": _policy(reg, a)})
                    r[f"{kind}_glibc_ns"] = float(m.group(2))
                    r[f"{kind}_ns"] = float(m.group(5))
                    r[f"{kind}_ratio"] = float(m.group(8))
        _check_all(f"interposer ({kind})", reg, seen)
    return (["algorithm", "policy", "lazy_glibc_ns", "lazy_ns", "lazy_ratio", "engaged_glibc_ns", "engaged_ns",
             "engaged_ratio", "lazy_mt_glibc_ns", "lazy_mt_ns", "lazy_mt_ratio", "engaged_mt_glibc_ns", "engaged_mt_ns",
             "engaged_mt_ratio"], [rows[a["name"]] for a in reg])


# --------------------------------------------------------------- rcl-latency
def reduce_rcl_latency(out, reg):
    runs = [r for r in _read_csv(os.path.join(out, "runs.csv")) if r.get("status") == "ok"]
    if not runs:
        raise SectionError("rcl-latency: no run succeeded")
    rows = []
    for reg_name in _runner.REGIME_NAMES:
        v = [r for r in runs if r.get("regime") == reg_name]
        if not v:
            continue
        er = [float(r["empty_ratio"]) for r in v]
        rows.append({"regime": reg_name, "runs": len(v), "probe_ns": _median(_f(r["probe_ns"]) for r in v),
                     "empty_ns": _median(_f(r["empty_ns"]) for r in v), "empty_ratio": statistics.median(er),
                     "empty_ratio_min": min(er), "empty_ratio_max": max(er),
                     "five_ns": _median(_f(r["five_ns"]) for r in v),
                     "five_ratio": _median(_f(r["five_ratio"]) for r in v)})
    return ["regime", "runs", "probe_ns", "empty_ns", "empty_ratio", "empty_ratio_min", "empty_ratio_max", "five_ns",
            "five_ratio"], rows


# ------------------------------------------------------------------- startup
def reduce_startup(out, reg):
    rows = _read_csv(os.path.join(out, "summary.csv"))
    if not rows:
        raise SectionError("startup: empty summary")
    return ["workload", "arm", "runs", "median_ms", "ratio"], rows


# ----------------------------------------------------------------- randarray
def randarray_combos(reg):
    """Every algorithm with its default policy, then the paper's spinning
    variants of MCS and MCSCR (the collapse concurrency restriction avoids)."""
    return [a["name"] for a in reg] + [c for c in ("mcs:spin", "mcscr:spin") if c.split(":")[0] in
                                       {a["name"] for a in reg}]


def reduce_randarray(out, reg):
    files = [f for f in os.listdir(out) if f.endswith("-summary.csv")]
    if len(files) != 1:
        raise SectionError(f"randarray: expected one *-summary.csv in {out}, found {len(files)}")
    summary = _read_csv(os.path.join(out, files[0]))
    rows = []
    for s in summary:
        rows.append({"combo": s["combo"], "policy": s["policy"], "throughput": _f(s["throughput_median"]),
                     "ratio": _f(s["ratio_vs_ref"]), "avg_lwss": _f(s["avg_lwss_median"]),
                     "mttr": _f(s["mttr_median"]), "gini": _f(s["gini_median"]), "vcsw": _f(s["vcsw_median"]),
                     "cpu_util": _f(s["cpu_util_median"])})
    _check_all("randarray", reg, {r["combo"] for r in rows})
    return ["combo", "policy", "throughput", "ratio", "avg_lwss", "mttr", "gini", "vcsw", "cpu_util"], rows


# ------------------------------------------------------------ machine (three)
def reduce_null_rpc(out, reg):
    """Medians per flag layout and probe regime over the ok runs; runs whose
    probes disagreed are kept under the regime `mixed` (not left out), so a
    busy machine still gives a row, which says what it is."""
    runs = [r for r in _read_csv(os.path.join(out, "runs.csv")) if r.get("status") == "ok" and r.get("layout")]
    groups = {}
    for r in runs:
        groups.setdefault((r.get("regime") or "none", r["layout"]), []).append(r)
    if not groups:
        raise SectionError("null-rpc: no run succeeded")
    rows = []
    for (regime, layout), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "same-line")):
        rows.append({"layout": layout, "regime": regime, "n": len(rs),
                     "cycles": _median(_f(r["cycles_per_rpc"]) for r in rs),
                     "ns": _median(_f(r["ns_per_rpc"]) for r in rs),
                     "probe_ns": _median(_f(r.get("probe_ns")) for r in rs)})
    return ["layout", "regime", "n", "cycles", "ns", "probe_ns"], rows


def reduce_store_cas(out, reg):
    runs = _read_csv(os.path.join(out, "runs.csv"))
    by = {}
    for r in runs:
        if r.get("op") and r.get("threads"):
            v = _f(r.get("cycles_per_op_mean")) or _f(r.get("cycles_per_op"))
            by.setdefault(int(r["threads"]), {})[r["op"].replace("-", "_")] = v
    if not by:
        raise SectionError("store-cas: no record")
    return ["threads", "store", "store_fence", "cas"], [dict(threads=t, **by[t]) for t in sorted(by)]


def reduce_latency_map(out, reg):
    runs = _read_csv(os.path.join(out, "runs.csv"))
    sizes, rows = [], {}
    for r in runs:
        if not r.get("size_bytes"):
            continue
        b = int(r["size_bytes"])
        lab = next((f"{b // m}{u}" for u, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)) if b >= m and b % m == 0),
                   str(b))
        if (b, lab) not in sizes:
            sizes.append((b, lab))
        o, rd = int(r["owner_cpu"]), int(r["reader_cpu"])
        pair = f"CPU{o} → CPU{rd}" + (" (local)" if o == rd else "")
        rows.setdefault((o, rd), {"pair": pair})[lab] = _f(r["ns_per_line"])
    if not rows:
        raise SectionError("latency-map: no record")
    sizes.sort()
    return ["pair"] + [lab for _, lab in sizes], [rows[k] for k in sorted(rows)]


# ------------------------------------------------------------------ profiler
PROFILE_PATTERNS = [("one thread, one mutex", ["10000000", "3"]),
                    ("one thread, 4,096 mutexes", ["-m", "4096", "-t", "1", "-s", "3", "1000000", "3"]),
                    ("two threads, 4,096 mutexes", ["-m", "4096", "-t", "2", "-s", "3", "1000000", "3"])]


def run_profiler(env, out, quick):
    """glibc / profiled (exact) / profiled (1 in 16 timed) interleaved, per pattern."""
    prog = env.program("profile_cost")
    lib = env.lib("liblock-profile.so")
    rounds = 2 if quick else 5
    base = {k: v for k, v in os.environ.items() if not k.startswith("LIBLOCK_") and k != "LD_PRELOAD"}
    arms = [("glibc", base),
            ("exact", dict(base, LD_PRELOAD=lib, LIBLOCK_PROFILE_OUT=os.path.join(out, "p.json"))),
            ("sampled", dict(base, LD_PRELOAD=lib, LIBLOCK_PROFILE_OUT=os.path.join(out, "p.json"),
                             LIBLOCK_PROFILE_TIME_EVERY="16"))]
    rows = []
    for rep in range(rounds):
        for pat, argv in PROFILE_PATTERNS:
            if quick:
                argv = [x if x not in ("10000000", "1000000") else str(int(x) // 10) for x in argv]
            for arm, e in arms:
                p = subprocess.run([prog] + argv, env=e, capture_output=True, text=True, timeout=300)
                m = re.search(r"ns_per_pair\s+([\d.]+)", p.stdout)
                if p.returncode != 0 or not m:
                    raise SectionError(f"profiler: profile_cost {' '.join(argv)} ({arm}) failed: "
                                       f"{(p.stderr.strip().splitlines() or ['no ns_per_pair line'])[-1]}")
                rows.append({"rep": rep, "pattern": pat, "arm": arm, "ns_per_pair": float(m.group(1))})
    _runner.write_csv(os.path.join(out, "runs.csv"), rows)


def reduce_profiler(out, reg):
    runs = _read_csv(os.path.join(out, "runs.csv"))
    rows = []
    for pat, _ in PROFILE_PATTERNS:
        med = {arm: _median(_f(r["ns_per_pair"]) for r in runs if r["pattern"] == pat and r["arm"] == arm)
               for arm in ("glibc", "exact", "sampled")}
        if None in med.values():
            raise SectionError(f"profiler: no runs for '{pat}'")
        rows.append({"pattern": pat, "glibc_ns": med["glibc"], "exact_ns": med["exact"], "sampled_ns": med["sampled"],
                     "exact_added": med["exact"] - med["glibc"], "sampled_added": med["sampled"] - med["glibc"]})
    return ["pattern", "glibc_ns", "exact_ns", "sampled_ns", "exact_added", "sampled_added"], rows


# ------------------------------------------------------------------ identity
# (_identity_bench.IdentityError is a ValueError, which the report reports as a failed section)
def reduce_identity(out, reg):
    return _identity_bench.reduce(_read_csv(os.path.join(out, "runs.csv")), _identity_bench.delegating(reg), _median)


# ----------------------------------------------------------------- memcached
def memcached_missing(env):
    import shutil
    for p in ("memcached", "memcslap", "memcstat"):
        if not shutil.which(p):
            return f"{p} is not installed (scripts/deps.sh installs memcached and libmemcached-tools)"
    return None


def _memcslap_rate(port, test, clients, per):
    p = subprocess.run(["memcslap", f"-s127.0.0.1:{port}", "-t", test, "-c", str(clients), "-e", str(per)],
                       capture_output=True, text=True, timeout=120)
    for line in (p.stdout + p.stderr).splitlines():
        f = line.split()
        # "Time to set 40000 keys by 4 threads: 0.567 seconds" (the field before the last)
        if len(f) >= 7 and f[0] == "Time" and f[2] == test and f[4] == "keys" and f[5] == "by":
            return clients * per / float(f[-2])
    raise SectionError(f"memcached: memcslap -t {test} printed no time ({(p.stderr.strip().splitlines() or [''])[-1]})")


def run_memcached(env, out, quick):
    """Unmodified memcached (`-t 4`) under glibc and under the interposer with
    every algorithm's default policy, memcslap Set then Get (4 clients),
    interleaved rounds (order rotated), the probes at each round's start."""
    from ._lockexp import registry
    algos = ["glibc"] + [a["name"] for a in registry(env)]
    lib = env.lib("liblock-interpose.so")
    base = {k: v for k, v in os.environ.items() if not k.startswith("LIBLOCK_") and k != "LD_PRELOAD"}
    rounds, per = (1, 2000) if quick else (3, 10000)
    port = 30000 + os.getpid() % 20000
    rows = []
    for rep in range(rounds):
        pr = _runner.probes(env)
        for i in range(len(algos)):
            a = algos[(i + rep) % len(algos)]
            e = dict(base) if a == "glibc" else dict(base, LD_PRELOAD=lib, LIBLOCK_LOCK=a, LIBLOCK_STRICT="1")
            port += 1
            srv = subprocess.Popen(["memcached", "-t", "4", "-p", str(port), "-U", "0", "-l", "127.0.0.1", "-m", "64"]
                                   + (["-u", "root"] if os.geteuid() == 0 else []), env=e,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(200):
                    if subprocess.run(["memcstat", f"--servers=127.0.0.1:{port}"], capture_output=True).returncode == 0:
                        break
                    if srv.poll() is not None:
                        raise SectionError(f"memcached under {a} exited with status {srv.returncode}")
                    time.sleep(0.05)
                row = {"rep": rep, "algorithm": a, **pr}
                for t in ("set", "get"):
                    row[t] = round(_memcslap_rate(port, t, 4, per), 1)
                rows.append(row)
            finally:
                srv.terminate()
                try:
                    srv.wait(10)
                except subprocess.TimeoutExpired:
                    srv.kill()
                    srv.wait()
    _runner.write_csv(os.path.join(out, "runs.csv"), rows, ["rep", "algorithm", "set", "get"])


def reduce_memcached(out, reg):
    runs = _read_csv(os.path.join(out, "runs.csv"))
    glibc = {r["rep"]: r for r in runs if r["algorithm"] == "glibc"}
    rows = []
    for a in ["glibc"] + [x["name"] for x in reg]:
        rs = [r for r in runs if r["algorithm"] == a]
        if not rs:
            continue
        row = {"algorithm": a, "policy": _policy(reg, a)}
        for t in ("set", "get"):
            row[t] = _median(_f(r[t]) for r in rs)
            row[t + "_ratio"] = _median(_f(r[t]) / _f(glibc[r["rep"]][t]) for r in rs
                                        if r["rep"] in glibc and _f(glibc[r["rep"]][t]))
        rows.append(row)
    _check_all("memcached", reg, {r["algorithm"] for r in rows})
    return ["algorithm", "policy", "set", "set_ratio", "get", "get_ratio"], rows


# ------------------------------------------------------------------ the list
LB = ["{liblock}", "bench"]
COMMON = ["--out", "{out}", "--quiet", "--no-plot"]


def sections():
    """The sections in report order."""
    return [
        Section("headline", "Headline", [LB + ["headline"] + COMMON],
                [LB + ["headline", "--reps", "1", "--budget", "10"] + COMMON], reduce_headline),
        Section("threads", "Throughput vs threads",
                [LB + ["threads", "--threads-list", "1,2,4,8,32", "--reps", "3", "--duration", "0.2"] + COMMON],
                [LB + ["threads", "--threads-list", "2,8", "--reps", "1", "--duration", "0.05"] + COMMON],
                reduce_threads),
        Section("oversubscription", "Oversubscription", [LB + ["oversubscription", "--reps", "3"] + COMMON],
                [LB + ["oversubscription", "--reps", "1", "--duration", "0.05", "--threads-list", "8", "--no-ceiling"]
                 + COMMON],
                reduce_oversubscription),
        Section("apps", "Applications under the interposer", [LB + ["apps", "--reps", "3"] + COMMON],
                [LB + ["apps", "--reps", "1", "--scale", "0.1", "--threads-list", "8", "--count-scale", "0"] + COMMON],
                reduce_apps),
        Section("auto", "auto: the algorithm chosen while the program runs", [LB + ["auto", "--reps", "5", "--variant", "nocond:LIBLOCK_AUTO_COND=1"] + COMMON],
                [LB + ["auto", "--reps", "1", "--scale", "0.1", "--duration", "0.05", "--threads-list", "8"]
                 + COMMON], reduce_auto),
        Section("condvars", "Condition variables",
                [LB + ["apps", "--apps", "bbuf", "--threads-list", "8,32", "--count-scale", "0", "--cond", kind,
                       "--reps", "3", "--out", "{out}/" + kind, "--quiet", "--no-plot"] for kind in ("fifo", "glibc")],
                [LB + ["apps", "--apps", "bbuf", "--threads-list", "8", "--count-scale", "0", "--cond", kind,
                       "--reps", "1", "--scale", "0.1", "--out", "{out}/" + kind, "--quiet", "--no-plot"]
                 for kind in ("fifo", "glibc")], reduce_condvars),
        Section("interposer", "Interposer: the uncontended pair",
                [["{bin}/interpose_overhead", "-r", "5", "-n", "1000000"],
                 ["{bin}/interpose_overhead", "-e", "-r", "5", "-n", "1000000"],
                 ["{bin}/interpose_overhead", "-m", "-r", "5", "-n", "1000000"],
                 ["{bin}/interpose_overhead", "-e", "-m", "-r", "5", "-n", "1000000"]],
                [["{bin}/interpose_overhead", "-r", "2", "-n", "100000"],
                 ["{bin}/interpose_overhead", "-e", "-r", "2", "-n", "100000"],
                 ["{bin}/interpose_overhead", "-m", "-r", "2", "-n", "100000"],
                 ["{bin}/interpose_overhead", "-e", "-m", "-r", "2", "-n", "100000"]], reduce_interposer),
        Section("rcl-latency", "RCL: delegated critical-section latency",
                [LB + ["rcl-latency", "--reps", "9"] + COMMON[:-1]],
                [LB + ["rcl-latency", "--reps", "2", "--args", "-f -r 2 -n 20000 -t 1"] + COMMON[:-1]],
                reduce_rcl_latency),
        Section("startup", "Start-up", [LB + ["startup", "--reps", "41", "--loop-reps", "11"] + COMMON[:-1]],
                [LB + ["startup", "--reps", "5", "--loop-reps", "2", "--loop", "20"] + COMMON[:-1]], reduce_startup),
        Section("randarray", "RandArray (Malthusian locks)",
                [LB + ["malthus", "table", "-t", "32", "-r", "3", "-d", "1", "--grace", "3", "--locks", "{combos}",
                       "--out", "{out}"]],
                [LB + ["malthus", "table", "-t", "8", "-r", "1", "-d", "0.1", "--grace", "3", "--locks", "{combos}",
                       "--out", "{out}"]], reduce_randarray),
        Section("null-rpc", "Null RPC", [LB + ["null-rpc", "--reps", "5"] + COMMON],
                [LB + ["null-rpc", "--reps", "1"] + COMMON], reduce_null_rpc),
        Section("store-cas", "Store and CAS on one shared line", [LB + ["store-cas", "--reps", "5"] + COMMON],
                [LB + ["store-cas", "--reps", "1", "--threads-list", "1,2"] + COMMON], reduce_store_cas),
        Section("latency-map", "Latency map", [LB + ["latency-map", "--reps", "3"] + COMMON],
                [LB + ["latency-map", "--reps", "1", "--sizes", "16K,4M"] + COMMON], reduce_latency_map),
        Section("profiler", "Profiler overhead", [[run_profiler]], [[run_profiler]], reduce_profiler),
        Section("identity", "Delegated sections with their caller's identity", [[_identity_bench.run]],
                [[_identity_bench.run]],
                reduce_identity),
        Section("memcached", "memcached under the interposer", [[run_memcached]], [[run_memcached]],
                reduce_memcached, needs=memcached_missing),
    ]


def by_name():
    return {s.name: s for s in sections()}


def expand(argv, env, out, reg):
    """An argv with its placeholders replaced (see the module's docstring)."""
    tools = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    repl = {"{liblock}": [sys.executable, os.path.join(tools, "liblock")]}
    res = []
    for a in argv:
        if a in repl:
            res += repl[a]
        else:
            a = a.replace("{out}", out).replace("{combos}", ",".join(randarray_combos(reg)))
            if a.startswith("{bin}/"):
                a = env.program(a[len("{bin}/"):])
            res.append(a)
    return res


def display(argv):
    """How a command is shown in the report (placeholders as a reader types them)."""
    words = []
    for a in argv:
        if a == "{liblock}":
            words.append("tools/liblock")
        elif a.startswith("{bin}/"):
            words.append("build/bin/" + a[len("{bin}/"):])
        elif a in ("--quiet", "--no-plot") or "{out}" in a:
            continue
        else:
            a = a.replace("{combos}", "ALL,mcs:spin,mcscr:spin")
            words.append(shlex.quote(a) if " " in a else a)
    clean = []
    for w in words:  # drop a dangling "--out"
        if clean and clean[-1] == "--out":
            clean.pop()
        clean.append(w)
    if clean and clean[-1] == "--out":
        clean.pop()
    return " ".join(clean)
