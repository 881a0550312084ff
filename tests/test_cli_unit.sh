#!/usr/bin/env bash
# test_cli_unit.sh BUILD - the unit tests of the `liblock` command's Python
# code (tests/cli/test_*.py, `python3 -m unittest`): argument parsing of every
# subcommand, the configuration file parser, the bench harness's medians,
# ratios and run order, the profiler's aggregation and advice, the
# transform's engine on small C snippets, and the package's import graph (no
# cycle).  A unittest skip is reported as "SKIP: test: cause" (tests/run.sh
# lists it as partly skipped), never passed silently.  Needs no build.
. "$(dirname "$0")/lib.sh" "$@"
timeout 300 python3 -m unittest discover -v -s tests/cli -t tests/cli > "$tmp/out" 2>&1
rc=$?
grep -E '^(FAIL|ERROR):|Error|Ran [0-9]+ test|^OK|^FAILED' "$tmp/out"
# "test_x (module.Class.test_x) ... skipped 'cause'" (or "cause"): one line
# per class and cause; a skip counted but not matched still gets a line
sed -n "s/^[A-Za-z_0-9]* (\(.*\)\.[A-Za-z_0-9]*) \.\.\. skipped ['\"]\(.*\)['\"]\$/SKIP: \1: \2/p" "$tmp/out" |
    sort -u > "$tmp/skips"
cat "$tmp/skips"
if grep -q 'skipped=[0-9]' "$tmp/out" && [ ! -s "$tmp/skips" ]; then
  skip "python3 -m unittest skipped some CLI unit tests: $(grep -o 'skipped=[0-9]*' "$tmp/out")"
fi
[ $rc -eq 0 ] && ok || { cat "$tmp/out"; fail "python3 -m unittest discover tests/cli: exit $rc"; }
grep -q '^Ran [1-9][0-9]* tests\? ' "$tmp/out" && ok || fail "no unit test ran"
finish
