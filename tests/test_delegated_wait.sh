#!/usr/bin/env bash
# test_delegated_wait.sh BUILD - a delegated critical section that waits on a
# condition variable for the whole run, and creates a thread first, must not
# stop the program (what memcached's maintenance threads do; docs/rcl.md,
# "What a delegated critical section may do"): tests/delegated/wait_create.c
# natively and under the interposer with rcl (default and yield waiting) and
# mcs; every run must print "ok" with exact counts, and under rcl the thread
# created inside the section must be SCHED_OTHER and allowed off the server
# CPU.  Bound: 60 s per run (a stall, not timing).
. "$(dirname "$0")/lib.sh" "$@"
libdir="$build/lib"
${CC:-cc} -O2 -pthread -Iinclude tests/delegated/wait_create.c -o "$tmp/wc" -L"$libdir" -llock -Wl,-rpath,"$libdir" ||
    { echo "FAIL: tests/delegated/wait_create.c does not compile"; exit 1; }
run() { # NAME ENV...
    local name=$1; shift
    out=$(env -u LIBLOCK_WAIT "$@" timeout 60 "$tmp/wc" 2>"$tmp/err"); rc=$?
    [ $rc -eq 0 ] && [ "${out#ok}" != "$out" ] || fail "$name: exit $rc: $out $(head -2 "$tmp/err")"
}
run native
pre="LD_PRELOAD=$libdir/liblock-interpose.so LIBLOCK_STRICT=1"
run rcl $pre LIBLOCK_LOCK=rcl
run "rcl --wait yield" $pre LIBLOCK_LOCK=rcl LIBLOCK_WAIT=yield
run "mcs --wait spin-then-park" $pre LIBLOCK_LOCK=mcs LIBLOCK_WAIT=spin-then-park
finish
