#!/usr/bin/env bash
# test_to_glibc.sh BUILD - the count of objects left to glibc, by reason
# (docs/interpose.md "What goes to glibc, and why"), with the program
# tests/to_glibc/prog.c:
#  - `liblock run` prints exactly one line at exit naming the kinds and the
#    reasons (robust, process-shared counted once for a robust and
#    process-shared mutex, priority-inheritance, priority-protection, a
#    process-shared condition variable, and with --sem a process-shared
#    semaphore), and nothing else;
#  - no line when nothing went to glibc, nor with LIBLOCK_WARN=0;
#  - a forked child reports what it made itself, its parent its own;
#  - a site a LIBLOCK_CONFIG file leaves to glibc is counted as such;
#  - `liblock profile` shows the same counts in its text report and JSON.
# Asserts no timing.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
case "$build" in /*) ;; *) build="$root/$build" ;; esac
export LIBLOCK_BUILD="$build"
liblock="$root/tools/liblock"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails+1)); }
CC=${CC:-cc}
"$CC" -O1 -rdynamic -o "$tmp/prog" tests/to_glibc/prog.c -lpthread || exit 1
unset LIBLOCK_WARN
# stderr is a file here: the line is printed only when asked for (a terminal
# gets it unasked); without the request a captured stderr stays as glibc's
export LIBLOCK_REPORT=1

expect_err() { # what expected-stderr-file command...
  local what=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [ $rc -eq 0 ] || fail "$what: exit $rc: $(cat "$tmp/err")"
  if ! cmp -s "$want" "$tmp/err"; then
    fail "$what: stderr is"; sed 's/^/    /' "$tmp/err"; echo "  expected"; sed 's/^/    /' "$want"
  fi
}

line_all='liblock: 5 mutexes and 1 condition variable went to glibc: 2 process-shared, 2 robust, 1 priority-inheritance, 1 priority-protection'
printf '%s\n' "$line_all" >"$tmp/all"
: >"$tmp/empty"
for algo in mcs cc-synch; do
  expect_err "run --lock $algo all" "$tmp/all" "$liblock" run --lock "$algo" -- "$tmp/prog" all
done
printf '%s\n' 'liblock: 5 mutexes, 1 condition variable and 1 semaphore went to glibc: 3 process-shared, 2 robust, 1 priority-inheritance, 1 priority-protection' >"$tmp/all_sem"
expect_err "run --sem all" "$tmp/all_sem" "$liblock" run --lock ttas --sem fifo -- "$tmp/prog" all
expect_err "run none" "$tmp/empty" "$liblock" run --lock mcs --sem fifo -- "$tmp/prog" none
expect_err "LIBLOCK_WARN=0" "$tmp/empty" env LIBLOCK_WARN=0 "$liblock" run --lock mcs -- "$tmp/prog" all
expect_err "captured stderr, LIBLOCK_REPORT unset" "$tmp/empty" env -u LIBLOCK_REPORT "$liblock" run --lock mcs -- "$tmp/prog" all
expect_err "LIBLOCK_REPORT=0" "$tmp/empty" env LIBLOCK_REPORT=0 "$liblock" run --lock mcs -- "$tmp/prog" all
# a terminal gets the line unasked (script(1) gives the program a pseudo-terminal)
if command -v script >/dev/null; then
  script -qec "env -u LIBLOCK_REPORT '$liblock' run --lock mcs -- '$tmp/prog' all" /dev/null </dev/null >"$tmp/tty" 2>&1
  grep -qF "$line_all" "$tmp/tty" || { fail "terminal: no line"; sed 's/^/    /' "$tmp/tty"; }
else
  echo "SKIP: the terminal case: no script(1)"
fi
printf '%s\n' 'liblock: 2 mutexes went to glibc: 2 robust' 'liblock: 1 mutex went to glibc: 1 robust' >"$tmp/fork"
expect_err "fork" "$tmp/fork" "$liblock" run --lock mcs -- "$tmp/prog" fork
printf 'default mcs\nsite tg_cfg_mutex glibc\n' >"$tmp/conf"
printf '%s\n' 'liblock: 1 mutex went to glibc: 1 left to glibc by the configuration' >"$tmp/config"
expect_err "config" "$tmp/config" "$liblock" run --config "$tmp/conf" -- "$tmp/prog" config

# the profiler: text report and JSON
"$liblock" profile --json "$tmp/rep.json" -- "$tmp/prog" all >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] || fail "profile: exit $rc: $(cat "$tmp/err")"
grep -qF "  ${line_all#liblock: } (not measured" "$tmp/err" || { fail "profile: no to-glibc line in the report:"; sed 's/^/    /' "$tmp/err"; }
python3 - "$tmp/rep.json" <<'PY' || fail "profile: JSON to_glibc"
import json, sys
tg = json.load(open(sys.argv[1])).get("to_glibc")
want = {"mutexes": 5, "conds": 1, "sems": 0,
        "reasons": {"process_shared": 2, "robust": 2, "prio_inherit": 1, "prio_protect": 1},
        "by_kind": {"mutexes": {"process_shared": 1, "robust": 2, "prio_inherit": 1, "prio_protect": 1},
                    "conds": {"process_shared": 1}, "sems": {}}}
if tg != want:
    print(f"  to_glibc = {tg}\n  expected   {want}")
    sys.exit(1)
PY
"$liblock" profile --json "$tmp/rep0.json" -- "$tmp/prog" none >"$tmp/out" 2>"$tmp/err" || fail "profile none: exit $?"
grep -q "went to glibc" "$tmp/err" && fail "profile none: a to-glibc line: $(grep 'went to glibc' "$tmp/err")"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["to_glibc"]; sys.exit(0 if (t["mutexes"],t["conds"],t["sems"],t["reasons"])==(0,0,0,{}) else 1)' \
  "$tmp/rep0.json" || fail "profile none: JSON to_glibc not zero"

echo "test_to_glibc.sh: $fails failure(s)"
[ $fails -eq 0 ]
