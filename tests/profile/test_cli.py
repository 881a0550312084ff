#!/usr/bin/env python3
"""`liblock profile` and `liblock run --config` without the profiling runtime
(driven by tests/test_profile_cli.sh, which builds the helpers):

 - hand-written raw dumps (tests/profile/*.raw.json) -> the report's exact
   JSON fields, ranking, grouping, merged call sites, histogram bounds,
   advice at known shares, the --advise file, re-read by the configuration
   parser and accepted by `liblock run --config`;
 - the advice rules at their boundaries (lower, upper, no upper, misses,
   threads > CPUs);
 - threshold derivation from fixed lockbench rows;
 - the configuration grammar: every bad line is one line naming FILE:LINE;
 - bad input (unknown option, unwritable --json/--plot/--advise, malformed
   --config, bad --only/--top, missing or non-executable program, bad dump):
   one line, the right exit status, and the program not started;
 - process handling with a stand-in runtime (fake_runtime.c): stdin/stdout/
   stderr and exit status passed through, a signal death gives 128+N and
   still the report, SIGKILL gives 137 and one line, SIGUSR1 snapshots.
Usage: test_cli.py ROOT BUILD TMP FAKE_SO PROG
"""
import json
import os
import subprocess
import sys

ROOT, BUILD, TMP, FAKE_SO, PROG = sys.argv[1:6]
sys.path.insert(0, os.path.join(ROOT, "tools"))
from liblock_cli import _profadvice as A  # noqa: E402
from liblock_cli import _profcalib as C  # noqa: E402
from liblock_cli import _profdata as D  # noqa: E402
from liblock_cli import _siteconfig as S  # noqa: E402

LIBLOCK = os.path.join(ROOT, "tools", "liblock")
FIX = os.path.join(ROOT, "tests", "profile")
TH = os.path.join(FIX, "thresholds.json")
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print(f"FAIL: {what}")


def liblock(*args, env=None, stdin=None):
    e = dict(os.environ)
    e["LIBLOCK_BUILD"] = BUILD
    e["XDG_CACHE_HOME"] = os.path.join(TMP, "cache")  # not the user's calibration
    e.update(env or {})
    return subprocess.run([LIBLOCK] + list(args), capture_output=True, text=True, env=e, input=stdin, timeout=120)


def one_line(p, status, words, what):
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    check(p.returncode == status, f"{what}: exit {p.returncode}, expected {status} ({p.stderr.strip()})")
    check(len(lines) == 1, f"{what}: {len(lines)} lines on stderr, expected 1: {p.stderr!r}")
    for w in words:
        check(w in p.stderr, f"{what}: '{w}' not in {p.stderr!r}")


def near(a, b, what):
    check(a is not None and abs(a - b) <= 1e-9 * max(1, abs(b)), f"{what}: {a} != {b}")


# --- 1. the server fixture: fields, ranking, grouping, advice -------------
js, conf = os.path.join(TMP, "server.json"), os.path.join(TMP, "server.conf")
p = liblock("profile", "--dump", os.path.join(FIX, "server.raw.json"), "--thresholds", TH,
            "--json", js, "--advise", conf)
check(p.returncode == 0, f"--dump server: exit {p.returncode}: {p.stderr}")
rep = json.load(open(js))
for k in ("program", "wall_ns", "threads", "cpus", "cs_share", "misses_available", "locks"):
    check(k in rep, f"top-level field {k}")
check(rep["program"] == "./server" and rep["wall_ns"] == 4000000000 and rep["threads"] == 3 and rep["cpus"] == 2,
      "top-level values")
near(rep["cs_share"], (6e9 + 2e9 + 1e7) / 1e10, "program cs_share")
check(rep["misses_available"] is False, "misses_available")
check([lk["site"] for lk in rep["locks"]] == ["hot.c:12", "db.c:88", "counter_lock", "cold.c:5"],
      f"ranking by share: {[lk['site'] for lk in rep['locks']]}")
hot, db, ctr, cold = rep["locks"]
for k in ("id", "site", "function", "count", "acquisitions", "contended", "wait_ns", "hold_ns", "cs_share",
          "utilisation", "misses_per_cs", "call_sites", "advice", "instances"):
    check(k in hot, f"lock field {k}")
check(hot["id"] == "0123456789abcdef" and hot["function"] == "main" and hot["count"] == 1, "hot identity")
check(hot["acquisitions"] == 1000000 and hot["contended"] == 400000, "hot counts")
check(hot["wait_ns"] == 4000000000 and hot["hold_ns"] == 2000000000, "hot times")
near(hot["cs_share"], 0.6, "hot share")
near(hot["utilisation"], 0.5, "hot utilisation")
check(hot["misses_per_cs"] is None, "misses null when unavailable")
check(hot["wait_p50_ns_bound"] == 128 and hot["wait_p99_ns_bound"] == 8192, "hot wait bucket bounds")
check(hot["hold_p50_ns_bound"] == 2048 and hot["hold_p99_ns_bound"] == 4096, "hot hold bucket bounds")
check(hot["cond_waits"] == 7, "cond waits carried")
check([c["site"] for c in hot["call_sites"]] == ["hot.c:30", "hot.c:44"], "call sites by time")
check(hot["call_sites"][0] == {"site": "hot.c:30", "function": "worker", "acquisitions": 600000,
                               "wait_ns": 2500000000, "hold_ns": 1200000000}, f"call site: {hot['call_sites'][0]}")
check(hot["advice"]["action"] == "delegate" and hot["advice"]["algorithm"] == "rcl", f"hot advice {hot['advice']}")
check(hot["advice"]["transform"] == ["hot.c:30", "hot.c:44"], "delegate names the call sites to transform")
check("60.0%" in hot["advice"]["reason"] and "50.0%" in hot["advice"]["reason"], "reason carries the numbers")
check(db["count"] == 3 and len(db["instances"]) == 3, "grouping: 3 instances at db.c:88")
check(db["acquisitions"] == 300000 and db["contended"] == 100000 and db["trylocks"] == 1000
      and db["trylock_failures"] == 250, "db sums")
near(db["cs_share"], 0.2, "db share")
near(db["utilisation"], 0.1, "db utilisation = its busiest instance")
near(db["utilisation_sum"], 0.25, "db utilisation_sum")
cs = {c["site"]: c for c in db["call_sites"]}
check(cs["db.c:120"]["acquisitions"] == 160000 and cs["db.c:120"]["wait_ns"] == 400000000
      and cs["db.c:120"]["hold_ns"] == 500000000, "call sites merged across instances (db.c:120)")
check(cs["db.c:150"]["acquisitions"] == 140000 and cs["db.c:150"]["hold_ns"] == 500000000, "merged db.c:150")
check([i["addr"] for i in db["instances"]] == ["0x7f0000000180", "0x7f0000000140", "0x7f0000000100"],
      "instances by share")
near(db["instances"][0]["cs_share"], 0.09, "per-instance share")
check(db["advice"]["action"] == "try" and db["advice"]["algorithm"] == "mcscr"
      and db["advice"]["wait"] == "spin-then-park", f"db advice (3 threads on 2 CPUs): {db['advice']}")
check(ctr["kind"] == "static" and ctr["first_lock_site"] == "log.c:7" and ctr["advice"]["action"] == "keep",
      "static mutex kept")
check(cold["acquisitions"] == 0 and cold["advice"]["action"] == "keep" and cold["wait_p50_ns_bound"] is None,
      "unused lock")
check("cache misses: not available on this machine (perf_event_open: Operation not supported)" in p.stderr,
      "text says misses are not available")
check("of thread time (the sum of the lifetimes of all threads" in p.stderr, "text states the denominator")
check("80.1%" in p.stderr, "text gives the program's share")

# the --advise file: only the locks to change, re-read by the parser
algos = {a["name"]: a for a in map(json.loads, subprocess.run([os.path.join(BUILD, "bin", "liblock-info")],
                                                                capture_output=True, text=True).stdout.split("\n")[:-1])}
parsed = S.parse(conf, algos)
check(parsed["default"] is None, "advise: no default line")
check(parsed["sites"] == [("0123456789abcdef", "rcl", None, None), ("0000000000000db0", "mcscr", "spin-then-park", None)],
      f"advise entries: {parsed['sites']}")
text = open(conf).read()
check("# hot.c:12 in main()" in text and "# db.c:88 in db_open()" in text, "advise comments name file:line, function")
p = liblock("run", "--config", conf, "--", "true")
check(p.returncode == 0, f"liblock run --config accepts the advice file: {p.stderr}")
if os.path.exists(os.path.join(BUILD, "bin", "liblock-config-check")):
    p = subprocess.run([os.path.join(BUILD, "bin", "liblock-config-check"), conf], capture_output=True, text=True)
    check(p.returncode == 0, f"liblock-config-check accepts the advice file: {p.stderr}")

# --- 2. the pair fixture: misses available, threads <= CPUs ---------------
js2 = os.path.join(TMP, "pair.json")
p = liblock("profile", "--dump", os.path.join(FIX, "pair.raw.json"), "--thresholds", TH, "--json", js2)
rep2 = json.load(open(js2))
a, b = rep2["locks"]
check(a["site"] == "pair.c:10" and b["site"] == "pair.c:11", "pair ranking")
near(a["misses_per_cs"], 2.0, "misses per cs")
check(a["advice"]["algorithm"] == "mcs" and a["advice"]["action"] == "try", f"between, few misses: {a['advice']}")
check(b["advice"]["action"] == "delegate" and "8.0 cache misses" in b["advice"]["reason"],
      f"between, many misses: {b['advice']}")
check("cache misses: not available" not in p.stderr and " 2.0 " in p.stderr, "misses column shown")

# --- 3. advice rules at the boundaries ------------------------------------
th = {"lower": 0.15, "upper": 0.5, "best_local": "ttas"}


def adv(share, threads=1, cpus=2, misses=None, thr=th):
    lock = {"cs_share": share, "acquisitions": 10, "misses_per_cs": misses, "call_sites": [{"site": "x.c:1"}]}
    return A.advise(lock, {"threads": threads, "cpus": cpus}, thr)


check(adv(0.1499)["action"] == "keep", "below lower: keep")
check(adv(0.15)["action"] == "try" and adv(0.15)["algorithm"] == "ttas", "at lower: the calibrated local lock")
check(adv(0.4999)["action"] == "try", "just below upper: try")
check(adv(0.5)["action"] == "delegate", "at upper: delegate")
check(adv(0.3, threads=4)["algorithm"] == "mcscr", "oversubscribed, no calibration of it: Malthusian (mcscr)")
ov = dict(th, best_oversubscribed="loiter", best_oversubscribed_wait="spin-then-park")
check(adv(0.3, threads=4, thr=ov)["algorithm"] == "loiter" and adv(0.3, threads=4, thr=ov)["wait"] == "spin-then-park",
      "oversubscribed: the calibrated lock")
check(adv(0.3, threads=4, thr=dict(ov, best_oversubscribed="posix"))["action"] == "keep",
      "oversubscribed, nothing beat posix: keep")
check(adv(0.3, misses=5.0)["action"] == "delegate", "misses >= 5 between: delegate")
check(adv(0.1, misses=50.0)["action"] == "keep", "misses do not move a lock below lower")
nou = dict(th, upper=None)
check(adv(0.99, thr=nou)["action"] == "try" and "no upper threshold" in adv(0.99, thr=nou)["reason"],
      "no upper threshold: never delegate on share alone")
check(adv(0.3, thr=dict(th, best_local="posix"))["action"] == "keep", "posix best locally: keep")

# --- 4. threshold derivation from fixed lockbench rows --------------------
def row(a, d, lat, workers=2):
    return {"algorithm": a, "delay_cycles": d, "lat_cycles_mean": lat, "workers": workers, "status": "ok",
            "check": "ok", "probe_agree": 1, "regime": "normal", "probe_ns": 70}


rows = []
lat = {"posix": [900, 600, 100, 60, 60], "rcl": [150, 150, 150, 150, 150], "mcs": [1000, 300, 80, 50, 50]}
ds = [100, 1000, 10000, 100000, 1000000]
for a, ls in lat.items():
    for d, l in zip(ds, ls):
        rows.append(row(a, d, l, 1 if a == "rcl" else 2))
t = C.derive(rows, ["posix", "rcl", "mcs"], ds)
# posix best 60: collapsed (>= 120) at 100 and 1000, not at 1e4 -> lower at 1000: 600/(600+1000)
check(t["lower_delay_cycles"] == 1000, f"lower delay {t['lower_delay_cycles']}")
near(t["lower"], round(600 / 1600, 4), "lower share")
# rcl (d+150)/1 vs posix (d+900)/2, mcs (d+1000)/2 at 100: 250 < 500: wins; at 1000: 1150 > 800: loses
check(t["upper_delay_cycles"] == 100, f"upper delay {t['upper_delay_cycles']}")
near(t["upper"], round(900 / 1000, 4), "upper share")
check(t["best_local"] == "mcs", f"best local {t['best_local']}")
A.check_thresholds(t, "derived")

orows = [{"algorithm": a, "delay_cycles": d, "throughput_cs_per_s": t * (2 if d == 1000 else 1), "status": "ok",
          "check": "ok", "probe_agree": 1, "regime": "normal"}
         for a, t in (("posix", 100), ("mcscr", 80), ("loiter", 150), ("mcs", 10)) for d in (100, 1000)]
o = C.derive_oversub(orows, ["posix", "mcscr", "loiter", "mcs"], [100, 1000])
check(o["best_oversubscribed"] == "loiter" and o["best_oversubscribed_wait"] == "spin-then-park"
      and o["best_oversubscribed_vs_posix"] == 1.5, f"oversubscribed derivation: {o}")
o = C.derive_oversub([r for r in orows if r["algorithm"] in ("posix", "mcs")], ["posix", "mcs"], [100, 1000])
check(o["best_oversubscribed"] == "posix" and o["best_oversubscribed_wait"] is None, f"none beats posix: {o}")

# --- 5. configuration grammar ----------------------------------------------
bad = {
    "site a.c:x mcs": "bad site key",
    "site a.c:0 mcs": "bad site key",
    "site a.c:1 nosuchlock": "unknown algorithm 'nosuchlock'",
    "site a.c:1 mcs wait=bogus": "unknown waiting policy 'bogus'",
    "site a.c:1 glibc wait=spin": "wait= does not apply to glibc",
    "site a.c:1 mcs server=0": "server= applies to rcl only",
    "site a.c:1 rcl server=999": "server CPU 999 does not exist",
    "site a.c:1 mcs colour=red": "unknown option 'colour='",
    "lock a.c:1 mcs": "unknown directive 'lock'",
    "site a.c:1": "needs a key and an algorithm",
    "default": "needs an algorithm name",
    "default mcs server=1": "server= applies to a 'site' line only",
    "default mcs\ndefault ttas": "a second 'default' line",
}
checker = os.path.join(BUILD, "bin", "liblock-config-check")
for i, (body, words) in enumerate(bad.items()):
    f = os.path.join(TMP, f"bad{i}.conf")
    with open(f, "w") as fh:
        fh.write("# comment\n" + body + "\n")
    ln = body.count("\n") + 2
    try:  # the Python pre-validation's own wording
        S.parse(f, algos)
        check(False, f"pre-validation accepted '{body}'")
    except S.ConfigError as e:
        check(str(e).startswith(f"{f}:{ln}: ") and words in str(e), f"pre-validation of '{body}': {e}")
    # the tools: one line naming FILE:LINE (the checker's wording when it is built), exit 2
    p = liblock("run", "--config", f, "--", "true")
    one_line(p, 2, [f"{f}:{ln}:"] + ([] if os.path.exists(checker) else [words]), f"run --config '{body}'")
    p = liblock("profile", "--config", f, "--", "true")
    one_line(p, 2, [f"{f}:{ln}:"], f"profile --config '{body}'")
good = os.path.join(TMP, "good.conf")
with open(good, "w") as fh:
    fh.write("# all forms\n\ndefault mcs wait=spin-then-park\nsite 0123456789abcdef rcl server=0  # id\n"
             "site foo.c:12 ttas\nsite my_static_lock glibc\nsite /abs/dir/bar.c:7 mcs\n")
check(S.parse(good, algos)["sites"][0] == ("0123456789abcdef", "rcl", None, 0), "good config parsed")
check(liblock("run", "--config", good, "--", "true").returncode == 0, "good config accepted by run")

# --- 6. bad input: one line, right status, the program never started ------
marker = os.path.join(TMP, "started")
touch = ["--", "touch", marker]
cases = [
    (["--bogus"] + touch, 2, ["unrecognized arguments: --bogus", "liblock profile -h"]),
    (["--json", os.path.join(TMP, "nodir", "x.json")] + touch, 2, ["--json", "does not exist"]),
    (["--advise", TMP] + touch, 2, ["--advise", "is a directory"]),
    (["--plot", os.path.join(TMP, "x.nosuchformat")] + touch, 2, ["--plot", "unknown image type"]),
    (["--plot", os.path.join(TMP, "nodir", "x.png")] + touch, 2, ["--plot", "does not exist"]),
    (["--config", os.path.join(TMP, "missing.conf")] + touch, 2, ["missing.conf", "no such file"]),
    (["--only", "xyz"] + touch, 2, ["--only"]),
    (["--top", "0"] + touch, 2, ["--top"]),
    (["--lock", "nosuchlock"] + touch, 2, ["unknown lock 'nosuchlock'"]),
    (["--wait", "spin"] + touch, 2, ["--wait applies to --lock"]),
    (["--thresholds", os.path.join(FIX, "server.raw.json")] + touch, 2, ["not a thresholds file"]),
    (["--", os.path.join(TMP, "no-such-program")], 127, ["program not found"]),
    (["--", FIX], 126, ["not executable"]),
    ([], 2, ["no program given"]),
]
ro = os.path.join(TMP, "ro")
os.makedirs(ro, exist_ok=True)
os.chmod(ro, 0o555)
if not os.access(ro, os.W_OK):  # root can write anywhere
    cases.append((["--json", os.path.join(ro, "x.json")] + touch, 2, ["not writable"]))
for args, status, words in cases:
    p = liblock("profile", *args)
    one_line(p, status, words, f"profile {' '.join(args)}")
    check(not os.path.exists(marker), f"profile {' '.join(args)}: the program ran")
baddump = os.path.join(TMP, "bad.raw.json")
with open(baddump, "w") as fh:
    fh.write('{"format": "liblock-profile-raw/1", "wall_ns": 1}')
one_line(liblock("profile", "--dump", baddump), 2, ["missing 'thread_ns'"], "bad dump")
with open(baddump, "w") as fh:
    fh.write("{not json")
one_line(liblock("profile", "--dump", baddump), 2, ["not JSON"], "dump not JSON")

# --- 7. process handling with the stand-in runtime -------------------------
fake = os.path.join(TMP, "fakebuild")
os.makedirs(os.path.join(fake, "lib"), exist_ok=True)
if not os.path.exists(os.path.join(fake, "bin")):
    os.symlink(os.path.join(BUILD, "bin"), os.path.join(fake, "bin"))
os.replace(FAKE_SO, os.path.join(fake, "lib", "liblock-profile.so"))
fenv = {"LIBLOCK_BUILD": fake}
fj = os.path.join(TMP, "fake.json")
p = liblock("profile", "--thresholds", TH, "--json", fj, "--", PROG, "echo", "3", env=fenv, stdin="hello\n")
check(p.returncode == 3, f"exit status passed through: {p.returncode}")
check(p.stdout == "hello\n", f"stdin/stdout passed through: {p.stdout!r}")
check(p.stderr.startswith("err\n"), f"program's stderr first: {p.stderr[:40]!r}")
check("fake.c:1" in p.stderr and json.load(open(fj))["locks"][0]["acquisitions"] == 10, "report after a normal exit")
p = liblock("profile", "--thresholds", TH, "--", PROG, "segv", env=fenv)
check(p.returncode == 128 + 11, f"SIGSEGV -> 139: {p.returncode}")
check("killed by signal 11" in p.stderr and "fake.c:1" in p.stderr, f"report after a signal death: {p.stderr}")
p = liblock("profile", "--thresholds", TH, "--", PROG, "kill9", env=fenv)
check(p.returncode == 137, f"SIGKILL -> 137: {p.returncode}")
one_line(p, 137, ["no profile was written", "SIGKILL"], "SIGKILL")
p = liblock("profile", "--thresholds", TH, "--", PROG, "usr1", env=fenv)
check(p.returncode == 0, f"usr1 run: {p.returncode} {p.stderr}")
check("snapshot 1" in p.stderr and "snapshot (SIGUSR1)" in p.stderr, f"SIGUSR1 snapshot report: {p.stderr}")
p = liblock("profile", "--", PROG, "echo", "0", env={"LIBLOCK_BUILD": os.path.join(TMP, "nobuild")})
check(p.returncode == 2 and "liblock-profile.so is missing" in p.stderr or "is missing" in p.stderr,
      f"missing runtime: {p.stderr}")

print(f"test_cli.py: {fails} failure(s)")
sys.exit(1 if fails else 0)
