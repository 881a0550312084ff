#!/usr/bin/env bash
# test_bench.sh BUILD - the benchmark harness is correct (never how fast
# anything is): every registered algorithm runs lockbench for a short fixed
# count with the counts adding up and the shared/context line check passing;
# delegating algorithms get the server convention (T-1 workers); JSON and CSV
# output carry every configuration and machine field; a time-bounded run is
# reported as a timeout, and so is a program stuck before or after its run
# (the watchdog); bad options give a usage message and exit 2; the
# characterisation programs run and produce parseable records; `liblock
# bench` writes CSV files that parse.
. "$(dirname "$0")/lib.sh" "$@"
lb="$build/bin/lockbench"
t0=$(date +%s)
section() { echo "-- $* (at $(( $(date +%s) - t0 )) s)"; }

[ -x "$lb" ] || { echo "FAIL: $lb missing (build first)"; exit 1; }

# 1. every registered algorithm, short fixed count, 3 threads (oversubscribed on 2 CPUs)
section "every algorithm"
"$build/bin/liblock-info" > "$tmp/algos.jsonl"
while read -r line; do
  name=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$line")
  for k in 5; do
    out=$(timeout 60 "$lb" -a "$name" -t 3 -n 200 -k $k -c 1 -d 200 -T 20 --no-probe -l "t-$name")
    rc=$?
    echo "$out" > "$tmp/run.json"
    if python3 - "$tmp/run.json" "$line" $k <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read())
info = json.loads(sys.argv[2]); k = int(sys.argv[3])
errs = []
if r["status"] != "ok": errs.append(f"status {r['status']} {r['error']}")
if r["check"] != "ok": errs.append(f"check {r['check']}")
deleg = "delegates" in info["properties"]
# classic locks: T workers; delegating locks with a server: server CPU + T-1
# clients; delegating locks without one (combining): T workers
if not deleg and r["convention"] != "all": errs.append(f"convention {r['convention']} for a classic lock")
if r["convention"] == "server" and r["server_mode"] in ("none", "reserved-idle"): errs.append("server convention without a server")
if r["convention"] == "all" and r["server_mode"] != "none": errs.append(f"server_mode {r['server_mode']} with T workers")
want_workers = 2 if r["convention"] == "server" else 3
if r["workers"] != want_workers: errs.append(f"workers {r['workers']} want {want_workers}")
if r["total_cs"] != 200 * want_workers: errs.append(f"total {r['total_cs']}")
pt = r["per_thread_counts"]
if len(pt) != want_workers or sum(pt) != r["total_cs"] or any(c != 200 for c in pt): errs.append(f"per-thread {pt}")
if r["per_thread_min"] != min(pt) or r["per_thread_max"] != max(pt): errs.append("min/max")
if r["lines"] != k or r["context_lines"] != 1 or r["algorithm"] != info["name"]: errs.append("config echo")
if not (r["lat_cycles_min"] <= r["lat_cycles_p50"] <= r["lat_cycles_p90"] <= r["lat_cycles_p99"] <= r["lat_cycles_max"]):
    errs.append("percentiles out of order")
if errs: print("; ".join(errs)); sys.exit(1)
PY
    then ok; else fail "lockbench $name k=$k (exit $rc)"; fi
  done
done < "$tmp/algos.jsonl"

# 2. forced server convention on a classic lock, fixed time, unpinned
section "server convention"
out=$(timeout 30 "$lb" -a ticket -t 2 --convention server -D 0.1 -p none --no-probe)
python3 -c '
import json,sys; r=json.loads(sys.argv[1])
assert r["workers"]==1 and r["convention"]=="server" and r["mode"]=="time" and r["status"]=="ok" and r["check"]=="ok", r
assert r["server_mode"]=="reserved-idle" and r["pin"]=="none"' "$out" && ok || fail "server convention / fixed time"

# 3. JSON and CSV carry the same, complete set of fields
section "output fields"
fields="benchmark label algorithm wait delegates threads workers convention convention_text server_cpu server_mode
delay_cycles lines context_lines mode duration_s count_per_thread pin timeout_s seed cpu_model ncpus cacheline kernel
compiler libc tsc_ghz topology status check elapsed_s total_cs throughput_cs_per_s per_thread_min per_thread_max
fairness_jain lat_cycles_p50 lat_cycles_p99 lat_ns_p50 lat_ns_mean probe_before_ns probe_after_ns per_thread_counts"
# (unpinned: a CPU held by someone else's real-time thread must not stall a harness check)
"$lb" -a spin -t 2 -n 100 -d 1e3 -k 3 -c 2 -s 9 -l lbl -p none -f json > "$tmp/a.json"
"$lb" -a spin -t 2 -n 100 -d 1e3 -k 3 -c 2 -s 9 -l lbl -p none -f csv --header > "$tmp/a.csv"
python3 - "$tmp/a.json" "$tmp/a.csv" $fields <<'PY' && ok || fail "output fields"
import csv, json, sys
j = json.loads(open(sys.argv[1]).read())
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 1, rows
c = rows[0]
assert list(j.keys()) == list(c.keys()), (list(j.keys()), list(c.keys()))
for f in sys.argv[3:]:
    assert f in j and j[f] is not None and j[f] != "", f"missing {f}"
assert j["delay_cycles"] == 1000 and j["lines"] == 3 and j["context_lines"] == 2 and j["seed"] == 9 and j["label"] == "lbl"
assert j["mode"] == "count" and j["count_per_thread"] == 100 and j["ncpus"] >= 1 and j["cacheline"] >= 16
assert c["algorithm"] == "spin" and int(c["total_cs"]) == 200 and json.loads(c["per_thread_counts"]) == [100, 100]
if j["ncpus"] > 1:  # a probe is a round trip in ns, or -1 when its responder could not start
    assert (j["probe_before_ns"] > 0 or j["probe_before_ns"] == -1) and (j["probe_after_ns"] > 0 or j["probe_after_ns"] == -1)
PY

# 3b. spin_budget_ns: the process's spin phase under spin-then-park, null otherwise
out1=$(LIBLOCK_SPIN_NS=12345 "$lb" -a ttas -t 2 -n 100 -p none --no-probe -f json)
out2=$(LIBLOCK_SPIN_NS=12345 "$lb" -a ttas -w spin -t 2 -n 100 -p none --no-probe -f json)
python3 -c '
import json,sys
a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2])
assert a["wait"]=="spin-then-park" and a["spin_budget_ns"]==12345, a["spin_budget_ns"]
assert b["wait"]=="spin" and b["spin_budget_ns"] is None, b["spin_budget_ns"]' "$out1" "$out2" && ok || fail "spin_budget_ns"

# 4. a run that cannot finish in its bound is reported as a timeout (exit 3)
section "timeout"
out=$(timeout 30 "$lb" -a posix -t 2 -n 1000 -d 2e7 -T 0.3 -p none --no-probe); rc=$?
python3 -c '
import json,sys; r=json.loads(sys.argv[1])
assert r["status"]=="timeout" and r["total_cs"] < 2000, r' "$out" && [ $rc -eq 3 ] && ok || fail "timeout not reported (rc=$rc)"

# 4b. set-up and tear-down are bounded too (the watchdog): a main thread
# stuck before the run (as behind a busy real-time thread on the server CPU
# when starting an RCL server) gives a timeout record naming the stage, exit 3
section "watchdog"
for st in server-start teardown; do
  out=$(LOCKBENCH_TEST_STALL=$st LOCKBENCH_TEST_SLACK=3 timeout 60 "$lb" -a cc-synch -t 2 -D 0.1 -T 0.1 -p none --no-probe -l 'r"1\x'); rc=$?
  python3 -c '
import json,sys; r=json.loads(sys.argv[1].splitlines()[-1])
assert r["status"]=="timeout" and r["stage"]==sys.argv[2] and r["algorithm"]=="cc-synch", r
assert r["label"]==chr(114)+chr(34)+"1"+chr(92)+"x", r["label"]' "$out" "$st" &&
    [ $rc -eq 3 ] && ok || fail "watchdog at stage $st not reported (rc=$rc): $out"
done

# an RCL server is started for rcl (LIBLOCK_PROP_SERVER) only, not for the
# other delegating algorithms (LIBLOCK_STATS=1 lists every server at exit)
for a in rcl cc-synch dsm-synch; do
  LIBLOCK_STATS=1 timeout 60 "$lb" -a $a -t 2 -n 200 -p none --no-probe > /dev/null 2> "$tmp/stats"; rc=$?
  n=$(grep -c "liblock: rcl server" "$tmp/stats")
  want=0; [ $a = rcl ] && want=1
  [ $rc -eq 0 ] && [ "$n" -eq $want ] && ok || fail "lockbench -a $a: $n RCL servers started, want $want (rc=$rc)"
done

# 5. bad options: usage message, exit 2
section "bad options"
for args in "-t 0" "-a no-such-lock" "--bogus" "-d abc" "-k 0" "-f xml" "-n -5" "stray" "-D" "--convention x" "-w nosuchpolicy"; do
  # shellcheck disable=SC2086
  "$lb" $args > "$tmp/o" 2> "$tmp/e"; rc=$?
  if [ $rc -eq 2 ] && grep -q "usage: lockbench" "$tmp/e" && [ ! -s "$tmp/o" ]; then ok; else fail "lockbench $args: rc=$rc"; fi
done

# 6. characterisation programs run and print parseable records (tiny sizes)
section "characterisation programs"
for cmd in "latmap --quick" "storecas --quick" "nullrpc --quick" "rpcbench --quick"; do
  prog=${cmd%% *}
  [ -x "$build/bin/$prog" ] || { fail "$prog missing"; continue; }
  # shellcheck disable=SC2086
  if timeout 60 "$build/bin/$prog" ${cmd#* } > "$tmp/$prog.jsonl" 2> "$tmp/$prog.err" &&
     python3 -c '
import json,sys
rs=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert rs, "no records"
for r in rs: assert r["benchmark"] and r["cpu_model"] and "ncpus" in r, r' "$tmp/$prog.jsonl"; then ok; else fail "$cmd"; cat "$tmp/$prog.err" >&2; fi
  "$build/bin/$prog" --bogus > /dev/null 2> "$tmp/e"; rc=$?
  [ $rc -eq 2 ] && grep -q "usage: $prog" "$tmp/e" && ok || fail "$prog --bogus rc=$rc"
done

# 7. the front end: a tiny contention sweep writes CSVs that parse, and a plot
section "front end"
if LIBLOCK_BUILD="$build" LIBLOCK_RESULTS="$tmp/results" timeout 120 python3 tools/liblock bench contention \
     --algorithms posix,spin --reps 2 --delays 100,1e4 --lines 1 --threads 2 --count 100 --pin none --out "$tmp/results/c" \
     > "$tmp/fe.out" 2>&1; then
  python3 - "$tmp/results/c" <<'PY' && ok || fail "front-end files"
import csv, os, sys
d = sys.argv[1]
runs = list(csv.DictReader(open(os.path.join(d, "runs.csv"))))
assert len(runs) == 2 * 2 * 2, len(runs)          # reps x delays x algorithms
for r in runs:
    assert r["status"] == "ok" and r["check"] == "ok", r
    for f in ("algorithm", "delay_cycles", "lines", "threads", "probe_before_ns", "probe_after_ns", "regime", "probe_agree", "rep"):
        assert f in r, f
# interleaved: consecutive runs alternate algorithms
assert runs[0]["algorithm"] != runs[1]["algorithm"]
summ = list(csv.DictReader(open(os.path.join(d, "summary.csv"))))
assert summ and all(s["n"] for s in summ)
assert any(f.endswith(".png") for f in os.listdir(d)), os.listdir(d)
PY
else fail "liblock bench contention failed"; cat "$tmp/fe.out" >&2; fi
if python3 tools/liblock bench contention --reps 0 > /dev/null 2> "$tmp/e"; then fail "bench --reps 0 accepted"; else ok; fi
if python3 tools/liblock bench contention --algorithms nosuch > /dev/null 2> "$tmp/e"; then fail "unknown algorithm accepted"; else grep -q nosuch "$tmp/e" && ok || fail "no message for unknown algorithm"; fi

finish
