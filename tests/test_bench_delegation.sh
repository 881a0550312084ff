#!/usr/bin/env bash
# test_bench_delegation.sh BUILD - `liblock bench delegation` and its program
# run and produce well-formed output (never how fast anything is): the
# delegation program's record for each object (counts check out); the
# bench at --quick scale writes runs.csv, summary.csv, meta.json and a plot
# with the fields the thesis's metrics need; bad input is refused with a
# message naming it.
. "$(dirname "$0")/lib.sh" "$@"
export LIBLOCK_BUILD="$build" LIBLOCK_RESULTS="$tmp/results"
prog="$build/bin/delegation"

# 1. the program: every object on a delegating algorithm, the counter by FAA
for obj in counter stack queue1 queue2; do
  out=$(timeout 60 "$prog" -a mp-server -o "$obj" -t 2 -D 0.05 --no-probe 2>&1)
  python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "ok" and r["check"] == "ok", r
assert r["object"] == sys.argv[2] and r["threads"] == 2 and r["total_ops"] > 0, r
for f in ("throughput_ops_per_s", "latency_ns_mean", "cycles_per_op", "fairness_max_min", "combining_rate",
          "cas_per_op", "server_busy_cycles_per_op", "probe_before_ns", "probe_after_ns", "cpu_model"):
    assert f in r, f
assert r["combining_rate"] not in ("", None) and r["server_busy_cycles_per_op"] not in ("", None), r
if sys.argv[2] == "queue2":
    assert r["mpserver_stream"] == "0", r  # streaming is not valid with two servers' "$out" "$obj" \
    && ok || fail "delegation -o $obj: $out"
done
out=$(timeout 60 "$prog" -a faa -t 2 -D 0.05 --no-probe 2>&1)
python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "ok" and r["check"] == "ok" and r["algorithm"] == "faa", r' "$out" && ok || fail "delegation -a faa: $out"
"$prog" -a faa -o stack > /dev/null 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "faa is a counter only" "$tmp/e" && ok || fail "faa with a stack: rc=$rc $(cat "$tmp/e")"
"$prog" -a mcs -o nosuch > /dev/null 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown object 'nosuch'" "$tmp/e" && ok || fail "unknown object: rc=$rc"
"$prog" -a nosuch > /dev/null 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "nosuch" "$tmp/e" && ok || fail "unknown algorithm: rc=$rc $(cat "$tmp/e")"

# 2. liblock bench delegation --quick
if timeout 120 python3 tools/liblock bench delegation --quick --algorithms mp-server,cc-synch,faa \
     --variants base,SS --out "$tmp/d" > "$tmp/d.out" 2>&1; then
  python3 - "$tmp/d" "$tmp/d.out" <<'PY' && ok || fail "delegation files"
import csv, json, os, sys
d, out = sys.argv[1], open(sys.argv[2]).read()
runs = list(csv.DictReader(open(os.path.join(d, "runs.csv"))))
assert {r["config"] for r in runs} == {"srv-base", "srv-SS", "cc-synch", "faa"}, runs
for r in runs:
    for f in ("rep", "object", "threads", "config", "algorithm", "status", "check", "throughput_ops_per_s",
              "ratio_vs_base", "latency_ns_mean", "fairness_max_min", "combining_rate", "cas_per_op",
              "server_busy_cycles_per_op", "probe_ns", "regime"):
        assert f in r, f
    assert r["status"] == "ok" and r["check"] == "ok", r
base = [r for r in runs if r["config"] == "srv-base"][0]
# 1 against itself (empty when a 0.1 s run on a loaded machine completed no operation)
assert base["ratio_vs_base"] == "1.0" or float(base["throughput_ops_per_s"]) == 0, base
summ = list(csv.DictReader(open(os.path.join(d, "summary.csv"))))
assert len(summ) == 4 and all(s["throughput_ops_per_s_median"] for s in summ), summ
meta = json.load(open(os.path.join(d, "meta.json")))
assert meta["configs"]["srv-SS"]["env"] == {"LIBLOCK_MPSERVER_STREAM": "1"}, meta["configs"]
assert os.path.exists(os.path.join(d, "delegation-counter.png"))
assert "counter, 2 client threads" in out and "Mops/s" in out, out
PY
else fail "liblock bench delegation --quick failed"; cat "$tmp/d.out" >&2; fi
for a in "--objects nosuch" "--variants B12x" "--algorithms nosuch"; do
  if python3 tools/liblock bench delegation --quick $a > /dev/null 2> "$tmp/e"; then
    fail "bench delegation $a accepted"
  else
    v=${a#* }; grep -q "${v%x}" "$tmp/e" && ok || fail "bench delegation $a: no message naming it: $(cat "$tmp/e")"
  fi
done

finish
