#!/usr/bin/env bash
# test_workloads - the bench/malthus workload harness (not its speed): every
# workload runs briefly with 1, 4 and 64 threads on mcs and posix, exits 0,
# prints a record that parses and carries every configuration field, its
# counts add up, and bad options give a message and a non-zero exit.
# usage: tests/test_workloads.sh BUILD_DIR
set -u
build=${1:-build}
exec timeout -k 5 240 python3 - "$build" <<'EOF'
import json, subprocess, sys, csv, io

build = sys.argv[1]
prog = f"{build}/bin/malthus"
failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print(f"FAIL {what}", file=sys.stderr)


def run(args, timeout=60):
    return subprocess.run([prog] + args, capture_output=True, text=True, timeout=timeout)


COMMON = ["bench", "workload", "lock", "policy", "threads", "workers", "duration_s", "elapsed_s", "ops",
          "throughput", "fairness", "acquisitions", "acq_per_op", "avg_lwss", "lwss_windows", "mttr", "gini",
          "rstddev", "fair_threads", "starved", "vcsw", "ivcsw", "cpu_s", "cpu_util", "probe_before_ns",
          "probe_after_ns", "drained", "ops_total", "acquisitions_total", "drain_s", "check", "seed", "cpus"]
SPECIFIC = {
    "randarray": ["cs_loads", "ncs_loads", "array_kb"],
    "ringwalker": ["ring", "ring_cs", "elem_bytes"],
    "producer-consumer": ["producers", "consumers", "queue", "cond_fifo", "produced", "consumed", "left",
                          "producer_waits", "consumer_waits"],
    "keymap": ["keys", "keyset", "replace", "ncs_steps"],
    "lrucache": ["keys", "keyset", "replace", "ncs_steps", "lru_capacity", "hits", "misses", "miss_rate"],
    "bufferpool": ["buffers", "buffer_kb", "swaps", "updates", "cond_fifo", "pool_waits"],
}
SMALL = {"keymap": ["--keys", "200000"]}
ONE_ACQ = {"randarray", "ringwalker", "keymap", "lrucache"}  # one admission per operation

for wl in SPECIFIC:
    for lock in ["mcs", "posix"]:
        for t in [1, 4, 64]:
            # 64 spinning waiters on 2 CPUs take seconds to drain behind
            # preempted successors: use mcs's spin-then-park there.
            pol = ["-p", "spin-then-park"] if (lock == "mcs" and t == 64) else []
            args = ["-w", wl, "-l", lock, "-t", str(t), "-d", "0.15", "-n", "-s", "7"] + pol + SMALL.get(wl, [])
            tag = " ".join(args)
            p = run(args)
            check(p.returncode == 0, f"{tag}: exit {p.returncode}: {p.stderr.strip()}")
            lines = [l for l in p.stdout.splitlines() if l.strip()]
            check(len(lines) == 1, f"{tag}: {len(lines)} output lines")
            if not lines:
                continue
            try:
                r = json.loads(lines[0])
            except ValueError as e:
                check(False, f"{tag}: output does not parse: {e}")
                continue
            for k in COMMON + SPECIFIC[wl]:
                check(k in r, f"{tag}: field {k} missing")
            check(r.get("workload") == wl and r.get("lock") == lock and r.get("threads") == t, f"{tag}: config echoed wrongly")
            check(r.get("seed") == 7 and r.get("duration_s") == 0.15, f"{tag}: seed/duration echoed wrongly")
            if pol:
                check(r.get("policy") == "spin-then-park", f"{tag}: policy {r.get('policy')}")
            check(r.get("drained") == 1 and r.get("check") == "ok", f"{tag}: drained {r.get('drained')} check {r.get('check')}")
            check(r["elapsed_s"] >= 0.15, f"{tag}: elapsed {r['elapsed_s']}")
            check(r["ops"] >= 0 and r["throughput"] >= 0 and r["cpu_util"] >= 0 and r["vcsw"] >= 0, f"{tag}: negative figures")
            check(abs(r["throughput"] - r["ops"] / r["elapsed_s"]) <= 0.01 * r["throughput"] + 1, f"{tag}: throughput != ops/elapsed")
            workers = r["workers"]
            check(workers == t + (3 if wl == "producer-consumer" else 0), f"{tag}: workers {workers}")
            check(r["fair_threads"] <= workers and r["starved"] <= workers, f"{tag}: thread counts")
            check(0 <= r["gini"] < 1 and r["rstddev"] >= 0, f"{tag}: gini {r['gini']} rstddev {r['rstddev']}")
            if r["acquisitions"] > 0:
                check(1 <= r["avg_lwss"] <= workers + 1, f"{tag}: avg_lwss {r['avg_lwss']}")  # +1: main's wake-up
            if wl in ONE_ACQ:
                # totals after every worker stopped: one admission per operation, exactly
                check(r["acquisitions_total"] == r["ops_total"], f"{tag}: acquisitions {r['acquisitions_total']} vs ops {r['ops_total']} (totals)")
            if t == 1 and wl in ONE_ACQ:
                check(r["ops"] > 0, f"{tag}: a lone thread made no progress")
                check(r["fair_threads"] == 1 and r["avg_lwss"] == 1 and r["gini"] == 0, f"{tag}: one-thread fairness {r}")
            if wl == "producer-consumer":
                check(r["produced"] == r["consumed"] + r["left"], f"{tag}: produced {r['produced']} != consumed {r['consumed']} + left {r['left']}")
                check(0 <= r["left"] <= r["queue"], f"{tag}: left {r['left']}")
                check(r["ops"] <= r["consumed"], f"{tag}: messages counted {r['ops']} > consumed {r['consumed']}")
                check(r["acquisitions"] >= r["ops"], f"{tag}: fewer acquisitions than messages")
            if wl == "lrucache":
                check(r["hits"] + r["misses"] >= r["ops"], f"{tag}: hits+misses {r['hits'] + r['misses']} < ops {r['ops']}")
            if wl == "bufferpool":
                check(r["acquisitions"] >= r["ops"], f"{tag}: fewer acquisitions than operations")

# CSV: header + one row, same fields; -H drops the header; -F 0 leaves the fairness fields empty.
p = run(["-w", "randarray", "-t", "2", "-d", "0.1", "-n", "-o", "csv", "-F", "0"])
check(p.returncode == 0, f"csv: exit {p.returncode}")
rows = list(csv.reader(io.StringIO(p.stdout)))
check(len(rows) == 2 and len(rows[0]) == len(rows[1]), f"csv: {len(rows)} rows")
if len(rows) == 2:
    rec = dict(zip(rows[0], rows[1]))
    for k in COMMON + SPECIFIC["randarray"]:
        check(k in rec, f"csv: field {k} missing")
    check(rec.get("fairness") == "0" and rec.get("gini") == "" and rec.get("avg_lwss") == "", f"csv -F 0: {rec}")
p = run(["-w", "randarray", "-t", "1", "-d", "0.05", "-n", "-o", "csv", "-H"])
check(p.returncode == 0 and len(p.stdout.splitlines()) == 1 and p.stdout.startswith("malthus,"), f"csv -H: {p.stdout!r}")

# The paper's parameters are the defaults (keymap: 10M keys pre-inserted).
# (The ping-pong probe is left out of the tests: on a busy machine it can take
# minutes, since both of its threads must run at once; -n sets its fields to null.)
p = run(["-w", "keymap", "-t", "1", "-d", "0.1", "-n"], timeout=150)
check(p.returncode == 0, f"keymap defaults: exit {p.returncode} {p.stderr}")
if p.returncode == 0:
    r = json.loads(p.stdout)
    check(r["keys"] == 10000000 and r["replace"] == 0.1 and r["keyset"] == 1000 and r["ncs_steps"] == 1000, f"keymap defaults {r}")
    check(r["probe_before_ns"] is None and r["probe_after_ns"] is None, "-n leaves the probe fields null")

# Bad options: a one-line message, non-zero exit, nothing on stdout.
for args, code in [(["-w", "nosuch"], 2), (["-w", "randarray", "-l", "nosuch"], 2), (["-w", "randarray", "-t", "0"], 2),
                   (["-w", "randarray", "-t", "abc"], 2), (["-w", "randarray", "-d", "-1"], 2),
                   (["-w", "randarray", "-o", "xml"], 2), ([], 2), (["-w", "keymap", "--replace", "2"], 2),
                   (["-w", "randarray", "extra"], 2), (["-w", "randarray", "-p", "sometimes"], 2),
                   (["-w", "randarray", "-F", "3"], 2), (["--bogus"], 2),
                   (["-w", "randarray", "-l", "posix", "-p", "yield", "-n"], 3)]:
    p = run(args)
    check(p.returncode == code, f"{args}: exit {p.returncode}, expected {code}")
    check(p.stdout == "" and p.stderr.strip() != "", f"{args}: stdout {p.stdout!r} stderr {p.stderr!r}")
p = run(["-h"])
check(p.returncode == 0 and "usage" in p.stdout, "-h")

print(f"test_workloads: {checks} checks, {failures} failed")
sys.exit(1 if failures else 0)
EOF
