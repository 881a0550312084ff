#!/usr/bin/env bash
# test_bench_manycore.sh BUILD - `liblock bench manycore` runs and writes its
# files (never how fast anything is): at this machine's CPU count, with a 40 s
# budget and three algorithms, it writes table.txt, plan.json, meta.json, the
# contention sweep's runs.csv and summary.csv with their columns, memcached's
# bench.csv and summary.csv, and manycore.png; every planned cell ran (runs =
# planned runs - runs not run), every algorithm at every point, rcl on T-1
# workers (the server convention); the run took no longer than its budget.
# `--plan N` prints the cells and stays within 480 s for 16, 64 and 224 CPUs;
# without memcslap the memcached part fails before anything runs, in one line.
# The memcached part needs its trees built (`make memcached-rcl` or one
# `liblock bench manycore`, which builds them): without them it is left out
# with --no-memcached, and the test says so (SKIP).
. "$(dirname "$0")/lib.sh" "$@"
export LIBLOCK_BUILD="$build" LIBLOCK_RESULTS="$tmp/results"
lm=(python3 tools/liblock bench manycore)

# 1. the plan, for machines this one is not
for n in 16 64 224; do
  out=$("${lm[@]}" --plan "$n" 2>&1); rc=$?
  total=$(sed -n 's/^  total: \([0-9]*\) s of 480 s$/\1/p' <<< "$out")
  [ $rc -eq 0 ] && [ -n "$total" ] && [ "$total" -le 480 ] && grep -q "contention subtotal" <<< "$out" &&
    grep -q "memcached subtotal" <<< "$out" && ok || fail "--plan $n: rc=$rc total='$total': $out"
done
"${lm[@]}" --plan 1 > /dev/null 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "N >= 2" "$tmp/e" && ok || fail "--plan 1: rc=$rc $(cat "$tmp/e")"

# 2. memcslap missing: one line naming it, exit 2, nothing run
mkdir -p "$tmp/bin"
ln -s "$(python3 -c 'import sys; print(sys.executable)')" "$tmp/bin/python3"
PATH="$tmp/bin" "${lm[@]}" --out "$tmp/nomc" --budget 40 > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/e")" -eq 1 ] && grep -q "memcached part cannot run: memcslap" "$tmp/e" &&
  grep -q -- "--no-memcached" "$tmp/e" && [ ! -e "$tmp/nomc" ] && ok ||
  fail "without memcslap: rc=$rc, stderr: $(cat "$tmp/e")"

# 3. a real run at this machine's CPU count, 40 s budget
mcopt=()
if ! command -v memcslap > /dev/null; then
  skip "memcached part: memcslap is not installed (libmemcached-tools)"; mcopt=(--no-memcached)
elif [ ! -x "$build/apps/memcached/tr/memcached" ] || [ ! -x "$build/apps/memcached/orig/memcached" ]; then
  skip "memcached part: its trees are not built in $build/apps/memcached (make memcached-rcl)"; mcopt=(--no-memcached)
fi
start=$(date +%s)
if timeout 120 "${lm[@]}" --out "$tmp/m" --budget 40 --algorithms posix,mcs,rcl --quiet "${mcopt[@]}" \
     > "$tmp/m.out" 2> "$tmp/m.err"; then
  ok
else
  fail "liblock bench manycore --budget 40: exit $?"; cat "$tmp/m.out" "$tmp/m.err"
fi
took=$(( $(date +%s) - start ))
# the budget, plus Python's start and the programs' check before the clock starts, plus what the last run and
# the plot may overrun on a loaded machine (the runs themselves are stopped by the budget's guard)
[ "$took" -le 60 ] && ok || fail "took $took s with --budget 40"
python3 - "$tmp/m" "$tmp/m.out" "${#mcopt[@]}" <<'PY' && ok || { fail "manycore files"; tail -30 "$tmp/m.out" "$tmp/m.err"; }
import csv, json, os, sys
d, out, no_mc = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3] != "0"
algos = ["posix", "mcs", "rcl"]
for f in ("table.txt", "plan.json", "meta.json", "manycore.png", "contention/runs.csv", "contention/summary.csv"):
    assert os.path.getsize(os.path.join(d, f)) > 0, f
assert open(os.path.join(d, "manycore.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
table = open(os.path.join(d, "table.txt")).read()
assert "plan for" in table and "cut to fit the budget" in table and "high contention (delay 100 cycles)" in table, table
plan = json.load(open(os.path.join(d, "plan.json")))
assert plan["budget_s"] == 40 and plan["fits"] and plan["total_s"] <= 40, plan["total_s"]
rt = plan["runtime"]
assert rt["total_s"] <= 55, rt
runs = list(csv.DictReader(open(os.path.join(d, "contention/runs.csv"))))
for col in ("rep", "algorithm", "threads", "workers", "delay_cycles", "lines", "status", "check", "lat_cycles_mean",
            "throughput_cs_per_s", "convention", "probe_ns", "probe_agree", "regime"):
    assert col in runs[0], col
cells = [c for c in plan["cells"] if c["part"] == "contention"]
# the plan is what ran
assert len(runs) == sum(c["runs"] for c in cells) - rt["contention"]["runs_not_run"], (len(runs), rt)
pts = {(c["threads"], c["delay_cycles"], c["lines"]) for c in cells}
assert {(100, 1), (100, 5), (2000000, 1), (2000000, 5)} == {(dl, k) for _, dl, k in pts}, pts
if not rt["contention"]["runs_not_run"]:
    for p in pts:
        got = {r["algorithm"] for r in runs if (int(r["threads"]), int(r["delay_cycles"]), int(r["lines"])) == p}
        assert got == set(algos), (p, got)
for r in runs:
    assert r["status"] == "ok" and r["check"] == "ok", r
    want = int(r["threads"]) - 1 if r["algorithm"] == "rcl" else int(r["threads"])
    assert int(r["workers"]) == want and (r["convention"] == "server") == (r["algorithm"] == "rcl"), r
summ = list(csv.DictReader(open(os.path.join(d, "contention/summary.csv"))))
for col in ("threads", "delay_cycles", "lines", "algorithm", "regime", "n", "lat_cycles_mean_median",
            "throughput_cs_per_s_median", "ratio_vs_posix"):
    assert col in summ[0], col
meta = json.load(open(os.path.join(d, "meta.json")))
if no_mc:
    assert "memcached: not run (--no-memcached)" in table and meta["memcached"].startswith("off"), meta["memcached"]
else:
    assert meta["memcached"] == "ok", meta["memcached"]
    bench = list(csv.DictReader(open(os.path.join(d, "memcached/bench.csv"))))
    for col in ("rep", "mc_threads", "clients", "config", "status", "get_ops", "set_ops", "set_per_client",
                "get_per_client", "probe_ns"):
        assert col in bench[0], col
    mcells = [c for c in plan["cells"] if c["part"] == "memcached"]
    assert len(bench) == sum(c["runs"] for c in mcells) - rt["memcached"]["runs_not_run"], (len(bench), rt)
    assert {r["config"] for r in bench} == {"glibc", meta["best"], "tr-rcl"}, bench
    assert meta["best"] in ("posix", "mcs"), meta["best"]     # a classic lock of the sweep
    assert all(r["status"] == "ok" for r in bench), bench
    ms = list(csv.DictReader(open(os.path.join(d, "memcached/summary.csv"))))
    for col in ("workers", "clients", "config", "role", "test", "n", "ops_median", "ratio_median"):
        assert col in ms[0], col
    assert {(r["role"], r["test"]) for r in ms} == {(c, t) for c in ("glibc", "best", "tr-rcl") for t in ("get", "set")}
    assert "memcslap ops/s" in table and "W=1" in table, table
PY

finish
