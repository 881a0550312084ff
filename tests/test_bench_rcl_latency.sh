#!/usr/bin/env bash
# test_bench_rcl_latency.sh BUILD - `liblock bench rcl-latency` runs and
# produces well-formed output (never how fast anything is): two builds given
# (here the same one twice) are run interleaved, runs.csv has one ok row per
# run with the probe, its regime and both ratios, meta.json names the
# builds, the table has a row per build; a build without rcl_latency is
# refused with a message naming it.  Needs two CPUs (client and server).
. "$(dirname "$0")/lib.sh" "$@"
export LIBLOCK_BUILD="$build" LIBLOCK_RESULTS="$tmp/results"
if [ "$(nproc)" -lt 2 ]; then
  skip "bench rcl-latency run: one CPU: rcl_latency needs a client CPU and a server CPU; only the refusal is checked"
else
  ln -s "$build" "$tmp/other"
  if timeout 120 python3 tools/liblock bench rcl-latency --reps 2 --builds "$build,$tmp/other" \
       --args "-r 1 -n 2000 -t 1" --out "$tmp/r" > "$tmp/out" 2> "$tmp/err"; then
    python3 - "$tmp/r" "$tmp/out" "$build" <<'PY' && ok || fail "bench rcl-latency output: $(cat "$tmp/out" "$tmp/err")"
import csv, json, os, sys
d, out, build = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3]
rows = list(csv.DictReader(open(os.path.join(d, "runs.csv"))))
assert len(rows) == 4, rows
assert all(r["status"] == "ok" for r in rows), rows
assert [r["build"] for r in rows][:2] != [r["build"] for r in rows][2:], rows   # rotated per repetition
for r in rows:
    assert float(r["probe_ns"]) > 0 and r["regime"] in ("fast", "normal", "slow"), r
    assert float(r["empty_ratio"]) > 0 and float(r["five_ratio"]) > 0 and float(r["empty_ns"]) > 0, r
meta = json.load(open(os.path.join(d, "meta.json")))
assert len(meta["builds"]) == 2 and meta["rcl_latency_args"] == "-r 1 -n 2000 -t 1", meta
labels = {r["build"] for r in rows}
assert len(labels) == 2, labels
assert "empty/probe" in out and all(l in out for l in labels), out
PY
  else fail "bench rcl-latency failed: $(cat "$tmp/err")"; fi
fi
if python3 tools/liblock bench rcl-latency --reps 1 --builds "$tmp/nosuch" > /dev/null 2> "$tmp/e"; then
  fail "bench rcl-latency accepted a build without rcl_latency"
else
  grep -q "nosuch/bin/rcl_latency is missing" "$tmp/e" && ok || fail "no message naming the build: $(cat "$tmp/e")"
fi

finish
