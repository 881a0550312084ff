#!/usr/bin/env python3
"""`liblock profile` end to end with the real runtime (build/lib/liblock-profile.so);
driven by tests/test_profile_cli.sh.  Usage: test_e2e.py ROOT BUILD TMP

 - hotcold.c (a hot lock taken 2 x 20000 times by two threads, a cold one 10
   times, a static one 5 times): the program's output and exit status are
   unchanged; exact acquisitions per lock; the ranking (hot first, by a
   margin of thousands of critical sections against ten); the sites resolved
   to hotcold.c:LINE of the init calls and of the lock calls, the static
   mutex by its symbol; --only ID records only that site; --advise writes a
   file that `liblock run --config` accepts and runs the program with the
   same output.
 - lockbench -a posix in fixed-count mode: the lock's acquisitions are
   exactly lockbench's total_cs + 1 (posix_destroy's trylock), and the time
   the profiler puts in its critical sections (wait + hold) is within a
   factor 2 of lockbench's own figure, total_cs x lat_ns_mean.  Both time the
   same critical sections with the same clock; they differ by what each
   brackets: lockbench's interval adds the liblock_execute call and its two
   cycle-counter reads, the profiler's the interposed calls' bookkeeping, each
   a few tens of ns against critical sections of 5 dependent cache-line
   accesses plus the acquisition (about 100-300 ns here).  A factor 2 leaves
   room for that and for the scheduler on a loaded 2-CPU machine while still
   catching a unit error (x1000) or a wrong denominator.
No timing is asserted.
"""
import json
import os
import re
import subprocess
import sys

ROOT, BUILD, TMP = sys.argv[1:4]
LIBLOCK = os.path.join(ROOT, "tools", "liblock")
FIX = os.path.join(ROOT, "tests", "profile")
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print(f"FAIL: {what}")


def liblock(*args):
    e = dict(os.environ, LIBLOCK_BUILD=BUILD, XDG_CACHE_HOME=os.path.join(TMP, "cache-e2e"))
    return subprocess.run([LIBLOCK] + list(args), capture_output=True, text=True, env=e, timeout=300)


def line_of(path, marker):
    for n, ln in enumerate(open(path), 1):
        if marker in ln:
            return n
    raise SystemExit(f"{marker} not in {path}")


src = os.path.join(FIX, "hotcold.c")
exe = os.path.join(TMP, "hotcold")
subprocess.run([os.environ.get("CC", "cc"), "-g", "-O1", "-pthread", "-o", exe, src], check=True)
native = subprocess.run([exe], capture_output=True, text=True)
js = os.path.join(TMP, "hotcold.json")
conf = os.path.join(TMP, "hotcold.conf")
p = liblock("profile", "--json", js, "--advise", conf, "--", exe)
check(p.returncode == 3 and native.returncode == 3, f"exit status passed through: {p.returncode}")
check(p.stdout == native.stdout == "counter 40000 cold+table 15\n", f"output unchanged: {p.stdout!r}")
rep = json.load(open(js))
by_site = {lk["site"]: lk for lk in rep["locks"]}
hot_site = f"hotcold.c:{line_of(src, 'HOT_INIT')}"
cold_site = f"hotcold.c:{line_of(src, 'COLD_INIT')}"
check(hot_site in by_site and cold_site in by_site and "table" in by_site,
      f"sites resolved: {sorted(by_site)} (expected {hot_site}, {cold_site}, table)")
if hot_site in by_site and cold_site in by_site and "table" in by_site:
    hot, cold, table = by_site[hot_site], by_site[cold_site], by_site["table"]
    check(hot["acquisitions"] == 40000 and cold["acquisitions"] == 10 and table["acquisitions"] == 5,
          f"exact acquisitions: {hot['acquisitions']} {cold['acquisitions']} {table['acquisitions']}")
    check(rep["locks"][0]["site"] == hot_site, f"hot lock ranked first: {[lk['site'] for lk in rep['locks']]}")
    check(hot["function"] == "main" and hot["count"] == 1, f"hot function/count {hot['function']} {hot['count']}")
    check([c["site"] for c in hot["call_sites"]] == [f"hotcold.c:{line_of(src, 'HOT_LOCK')}"],
          f"hot call site: {hot['call_sites']}")
    check(hot["call_sites"][0]["acquisitions"] == 40000, "call site acquisitions")
    check(cold["call_sites"][0]["site"] == f"hotcold.c:{line_of(src, 'COLD_LOCK')}", "cold call site")
    check(table.get("kind") == "static" and table.get("first_lock_site") == f"hotcold.c:{line_of(src, 'TABLE_LOCK')}",
          f"static mutex: {table.get('kind')} {table.get('first_lock_site')}")
    check(0 < rep["cs_share"] <= 1 and rep["threads"] == 2, f"program share/threads {rep['cs_share']} {rep['threads']}")
    check(rep["misses_available"] or "cache misses: not available on this machine" in p.stderr,
          "misses: available or said not to be")
    # --only: re-profile one lock
    js2 = os.path.join(TMP, "only.json")
    p2 = liblock("profile", "--only", hot["id"], "--json", js2, "--", exe)
    rep2 = json.load(open(js2))
    check([lk["id"] for lk in rep2["locks"] if lk["acquisitions"]] == [hot["id"]],
          f"--only records one site: {[(lk['site'], lk['acquisitions']) for lk in rep2['locks']]}")
    check(p2.returncode == 3, "--only run exit status")
# the advice file is accepted and applied
p3 = liblock("run", "--config", conf, "--", exe)
check(p3.returncode == 3 and p3.stdout == native.stdout, f"liblock run --config advice: {p3.returncode} {p3.stderr}")

# lockbench: exact count and share against its own figures
lb = os.path.join(BUILD, "bin", "lockbench")
jl = os.path.join(TMP, "lockbench.json")
p = liblock("profile", "--json", jl, "--", lb, "-a", "posix", "-t", "2", "-d", "1000", "-k", "5", "-n", "20000",
            "--no-probe", "-f", "json")
check(p.returncode == 0, f"lockbench under the profiler: {p.returncode} {p.stderr[-300:]}")
recs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
rep = json.load(open(jl))
if recs and rep["locks"]:
    lbr = recs[-1]
    top = max(rep["locks"], key=lambda lk: lk["acquisitions"])
    check(lbr["check"] == "ok" and lbr["total_cs"] == 40000, f"lockbench run ok: {lbr['check']} {lbr['total_cs']}")
    check(top["acquisitions"] == lbr["total_cs"] + 1,
          f"acquisitions {top['acquisitions']} = total_cs {lbr['total_cs']} + 1 (destroy's trylock)")
    prof_ns = top["wait_ns"] + top["hold_ns"]
    lb_ns = lbr["total_cs"] * lbr["lat_ns_mean"]
    ratio = prof_ns / lb_ns if lb_ns else 0
    print(f"lockbench: profiler {prof_ns / 1e6:.2f} ms in critical sections, lockbench {lb_ns / 1e6:.2f} ms "
          f"(ratio {ratio:.2f}); share {top['cs_share']:.3f} of {rep['thread_ns'] / 1e6:.1f} ms of thread time")
    check(0.5 <= ratio <= 2.0, f"profiler's critical-section time within a factor 2 of lockbench's: {ratio:.2f}")
    check(re.match(r".*lockbench\.c:\d+$|.*\.c:\d+$", top["site"]) is not None, f"lockbench lock site {top['site']}")
else:
    check(False, f"lockbench gave no record or no lock: {p.stdout[-200:]} {p.stderr[-300:]}")

print(f"test_e2e.py: {fails} failure(s)")
sys.exit(1 if fails else 0)
