#!/usr/bin/env bash
# test_bench_oversub.sh BUILD - the oversubscription instruments run and produce
# well-formed output (never how fast anything is): the wake-up probe
# program; lockbench's hand-off counter and wake-up probe fields; `liblock
# bench oversubscription` and `liblock bench apps` at a tiny scale (one
# round, two algorithms, a fraction of a second) write runs.csv,
# summary.csv, meta.json and a plot and exit 0; the application programs
# check their own output; bad options are refused.
. "$(dirname "$0")/lib.sh" "$@"
t0=$(date +%s)
section() { echo "-- $* (at $(( $(date +%s) - t0 )) s)"; }
export LIBLOCK_BUILD="$build" LIBLOCK_RESULTS="$tmp/results"

# 1. the wake-up probe on its own
section "wake_probe"
if timeout 60 "$build/bin/wake_probe" --quick > "$tmp/w.json" 2> "$tmp/w.err"; then
  python3 - "$tmp/w.json" <<'PY' && ok || fail "wake_probe record"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(rs) == 1, rs
r = rs[0]
for f in ("wake_cross_ns", "wake_same_ns", "wake_cross_samples", "wake_same_samples", "probe_before_ns", "cpu_model"):
    assert f in r and r[f] is not None, f
# a median in ns, or -1 when no sample could be taken (a CPU held by someone else)
assert r["wake_same_ns"] > 0 or r["wake_same_ns"] == -1, r
assert r["wake_same_samples"] <= 30 and (r["wake_same_ns"] == -1) == (r["wake_same_samples"] == 0), r
if r["ncpus"] > 1:
    assert r["wake_cross_ns"] > 0 or r["wake_cross_ns"] == -1, r
PY
else fail "wake_probe --quick failed"; cat "$tmp/w.err" >&2; fi
"$build/bin/wake_probe" --samples 0 > /dev/null 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "usage: wake_probe" "$tmp/e" && ok || fail "wake_probe --samples 0: rc=$rc"

# 2. lockbench --handoffs --wake-probe --alt-probe: the fields are there and consistent
section "lockbench hand-offs"
out=$(timeout 60 "$build/bin/lockbench" -a mcs -t 2 -n 300 -w spin-then-park --handoffs --wake-probe --alt-probe -p none)
python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "ok" and r["check"] == "ok", r
# each thread ran at least once after the other (or after nobody): >= 2 owner changes
assert 2 <= r["handoffs"] <= r["total_cs"] == 600, r
assert r["handoff_ns"] > 0
for f in ("wake_before_ns", "wake_after_ns", "wake_same_before_ns", "wake_same_after_ns"):
    assert r[f] > 0 or r[f] == -1, (f, r[f])
# the alternation probe: critical sections per second (millions), or -1 when it could not be taken
for f in ("alt_before_mops", "alt_after_mops"):
    assert r[f] > 0 or r[f] == -1, (f, r[f])
    if r["ncpus"] == 1:
        assert r[f] == -1, (f, r[f])
# and it leaves the run alone: the run checked its own lines (exact counts) above' "$out" \
  && ok || fail "lockbench --handoffs --wake-probe --alt-probe: $out"
# the delegation probe: round trips per second (millions), or -1; the run itself unchanged
out=$(timeout 60 "$build/bin/lockbench" -a ttas -t 2 -n 300 --rpc-probe -p none)
python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "ok" and r["check"] == "ok", r
for f in ("rpc_before_mops", "rpc_after_mops"):
    assert r[f] > 0 or r[f] == -1, (f, r[f])
    if r["ncpus"] == 1:
        assert r[f] == -1, (f, r[f])
assert r["alt_before_mops"] is None, r' "$out" && ok || fail "lockbench --rpc-probe: $out"
out=$(timeout 60 "$build/bin/lockbench" -a posix -t 2 -n 100 --no-probe -p none)
python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["handoffs"] is None and r["wake_before_ns"] is None and r["alt_before_mops"] is None, r
assert r["rpc_before_mops"] is None, r' "$out" \
  && ok || fail "lockbench without --handoffs"

# 3. the application programs check themselves, under glibc
section "application programs"
"$build/bin/apps/bbuf" 4 1000 4 | grep -q '^ok items=1000 sum=500500' && ok || fail "bbuf output"
python3 bench/apps/pyqueue.py 4 1000 4 | grep -q '^ok items=1000 sum=500500' && ok || fail "pyqueue output"
if [ -x "$build/bin/apps/sqlite_threads" ]; then
  "$build/bin/apps/sqlite_threads" 4 100 | grep -q '^ok rows=400 sum=80200' && ok || fail "sqlite_threads output"
else
  echo "(sqlite_threads not built: libsqlite3-dev missing; the sqlite program is left out below)"
fi
"$build/bin/apps/bbuf" 1 10 > /dev/null 2>&1; [ $? -eq 2 ] && ok || fail "bbuf with 1 thread accepted"

# 4. liblock bench oversubscription, tiny
section "bench oversubscription"
if timeout 120 python3 tools/liblock bench oversubscription --algorithms posix,mcs,ttas,rcl --threads-list 3 --reps 1 \
     --duration 0.1 --timeout 5 --pin none --out "$tmp/ov" > "$tmp/ov.out" 2>&1; then
  python3 - "$tmp/ov" "$tmp/ov.out" <<'PY' && ok || fail "oversubscription files"
import csv, json, os, sys
d, out = sys.argv[1], open(sys.argv[2]).read()
runs = list(csv.DictReader(open(os.path.join(d, "runs.csv"))))
over = [r for r in runs if r["series"] == "oversub"]
ceil = [r for r in runs if r["series"] == "ceiling"]
assert len(over) == 4 and len(ceil) == 3, runs
assert {r["algorithm"] for r in over} == {"posix", "mcs", "ttas", "rcl"}
# the ceiling series: non-FIFO algorithms only, as many threads as CPUs, pure spin where the lock has it
assert {r["algorithm"] for r in ceil} == {"posix", "ttas", "rcl"}, ceil
for r in ceil:
    assert r["threads"] == str(os.cpu_count()), r
    assert r["wait"] == ("park" if r["algorithm"] == "posix" else "spin"), r
for r in over:
    for f in ("rep", "threads", "wait", "fifo", "completed", "throughput_cs_per_s", "ratio_vs_baseline", "handoffs",
              "handoff_ns", "wake_ns", "wake_same_ns", "handoff_over_wake", "probe_ns", "regime"):
        assert f in r, f
    assert r["threads"] == "3"
    if r["completed"] == "1":
        assert float(r["throughput_cs_per_s"]) > 0 and int(r["handoffs"]) >= 1, r
    # the alternation bound: the probe's rate / posix's in the round / hand-offs per CS
    assert "alt_cs_per_s" in r and "alt_bound" in r, r
    po = [x for x in over if x["algorithm"] == "posix"][0]
    if r["algorithm"] == "rcl":
        # a delegating lock: no alternation bound; with a server, the delegation bound
        assert r["alt_bound"] == "", r
        if r["completed"] == "1" and po["completed"] == "1" and r["rpc_cs_per_s"]:
            want = float(r["rpc_cs_per_s"]) / float(po["throughput_cs_per_s"])
            assert abs(float(r["rpc_bound"]) - want) <= 1e-3 * want + 1e-4, (r, want)
    else:
        assert r["rpc_cs_per_s"] == "" and r["rpc_bound"] == "", r  # only locks with a server take it
        if r["completed"] == "1" and po["completed"] == "1" and r["alt_cs_per_s"]:
            want = (float(r["alt_cs_per_s"]) / float(po["throughput_cs_per_s"])
                    / (int(r["handoffs"]) / int(r["total_cs"])))
            assert abs(float(r["alt_bound"]) - want) <= 1e-3 * want + 1e-4, (r, want)
summ = list(csv.DictReader(open(os.path.join(d, "summary.csv"))))
assert len(summ) == 4 and all(s["target"] and s["meets"] in ("0", "1", "") for s in summ), summ
assert [s for s in summ if s["algorithm"] == "mcs"][0]["fifo"] == "1"
assert [s for s in summ if s["algorithm"] == "mcs"][0]["ceiling_ratio_median"] == ""
t = [s for s in summ if s["algorithm"] == "ttas"][0]
assert t["ceiling_runs"] == "1" and t["ceiling_wait"] == "spin", t
if t["ceiling_completed"] == "1" and [r for r in ceil if r["algorithm"] == "posix"][0]["completed"] == "1":
    assert float(t["ceiling_ratio_median"]) > 0, t
    # against posix at the row's own thread count, same round
    pt = [r for r in runs if r["series"] == "oversub" and r["algorithm"] == "posix"][0]
    tc = [r for r in ceil if r["algorithm"] == "ttas"][0]
    if pt["completed"] == "1":
        want = float(tc["throughput_cs_per_s"]) / float(pt["throughput_cs_per_s"])
        assert abs(float(t["ceiling_at_t_median"]) - want) <= 1e-3 * want + 1e-4, (t, want)
assert [s for s in summ if s["algorithm"] == "mcs"][0]["ceiling_at_t_median"] == ""
meta = json.load(open(os.path.join(d, "meta.json")))
assert "mcs" in meta["targets"], meta
assert os.path.exists(os.path.join(d, "oversubscription.png"))
assert "oversubscription targets" in out and "T = 3 threads" in out and "ceiling" in out and "bench/altprobe.h" in out, out
PY
else fail "liblock bench oversubscription failed"; cat "$tmp/ov.out" >&2; fi
# the Markdown report of that directory: one row per algorithm, the ceiling column
if python3 tools/liblock bench report "$tmp/ov" > "$tmp/rep.md" 2> "$tmp/rep.err"; then
  grep -q '^| ttas | spin-then-park | no | .* | 1/1 | ' "$tmp/rep.md" && grep -q 'ceiling: [0-9]* thr, spin' "$tmp/rep.md" \
    && { grep -q '^| mcs | .* | – | 1/1 | ' "$tmp/rep.md" \
         || { grep -qE '^\| mcs \| .* \| – \| ([0-9.]+×|–) \| 1/1 \| ' "$tmp/rep.md" && grep -q '^Bound: ' "$tmp/rep.md"; }; } \
    && ok || { fail "report table"; cat "$tmp/rep.md" >&2; }
# (the bound column is there when some run could take the alternation or delegation probe)
else fail "liblock bench report failed: $(cat "$tmp/rep.err")"; fi
if python3 tools/liblock bench report "$tmp" > /dev/null 2> "$tmp/rep.err"; then fail "report: non-results directory accepted"
else grep -q "not a results directory" "$tmp/rep.err" && ok || fail "report: no message: $(cat "$tmp/rep.err")"; fi
if python3 tools/liblock bench oversubscription --locks nosuch > /dev/null 2> "$tmp/e"; then
  fail "oversubscription: unknown algorithm accepted"; else grep -q nosuch "$tmp/e" && ok || fail "no message for nosuch"; fi

# 5. liblock bench apps, tiny
section "bench apps"
apps=bbuf,pyqueue; [ -x "$build/bin/apps/sqlite_threads" ] && apps=$apps,sqlite
# Runs take well under a second; --min-bound 60 keeps the bound for a hang only, so every run must
# finish with its output checked (a run killed at the bound is a failure, not a skip).
if timeout 300 python3 tools/liblock bench apps --algorithms posix,ttas --apps $apps --threads-list 4 --reps 1 \
     --scale 0.05 --min-bound 60 --out "$tmp/ap" > "$tmp/ap.out" 2>&1; then
  python3 - "$tmp/ap" "$tmp/ap.out" "$apps" <<'PY' && ok || fail "apps files"
import csv, json, os, sys
d, out, apps = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3].split(",")
runs = list(csv.DictReader(open(os.path.join(d, "runs.csv"))))
assert len(runs) == 3 * len(apps), len(runs)  # (glibc + 2 algorithms) x programs
for r in runs:
    # every run finished with the right output (one killed at the 60 s bound hung)
    assert r["status"] == "ok" and r["output"].startswith("ok"), r
    if r["algorithm"] == "glibc":
        assert float(r["ratio_vs_glibc"]) == 1.0, r
    else:
        assert float(r["ratio_vs_glibc"]) > 0, r
summ = list(csv.DictReader(open(os.path.join(d, "summary.csv"))))
assert len(summ) == 3 * len(apps), summ
meta = json.load(open(os.path.join(d, "meta.json")))
assert set(meta["targets"]) == {"posix", "ttas"}, meta["targets"]
assert os.path.exists(os.path.join(d, "apps.png"))
assert "application target" in out and "bbuf:" in out, out
PY
else fail "liblock bench apps failed"; cat "$tmp/ap.out" >&2; fi
if python3 tools/liblock bench apps --threads-list 1 > /dev/null 2> "$tmp/e"; then
  fail "apps: 1 thread accepted"; else grep -q "thread counts" "$tmp/e" && ok || fail "no message for 1 thread"; fi
if python3 tools/liblock bench apps --apps nosuch > /dev/null 2> "$tmp/e"; then
  fail "apps: unknown program accepted"; else grep -q nosuch "$tmp/e" && ok || fail "no message for nosuch program"; fi

section "done"
finish
