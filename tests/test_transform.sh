#!/usr/bin/env bash
# test_transform.sh BUILD - `liblock transform` and liblock_execute_mutex.
#
#  - tests/transform/execute_mutex.c (linked with liblock.so): exact counts
#    with liblock_execute_mutex interleaved with pthread_mutex_lock/unlock of
#    the same mutex, and liblock_execute_mutex_cond with waits inside;
#    natively every critical section runs on the caller, under
#    `liblock run --lock rcl` none does (the interposer's definition is the
#    one used), and under mcs and cc-synch the counts are exact;
#  - every other program of tests/transform/ (one shape each; its first line
#    says how many sections must be transformed/refused/nested) is
#    transformed with --out and --report, compiled with -Iinclude
#    -Lbuild/lib -llock, and run unmodified and transformed, natively and
#    interposed (the environment `liblock run` sets) with rcl, mcs and
#    cc-synch: every
#    output is identical to the unmodified native run;
#  - inputs.c under rcl: every transformed section ran on the server (its
#    "remote" count equals the number of sections), none unmodified;
#  - --diff prints a diff, --only selects one section, --in-place, bad
#    --wrapper, a file that does not compile (left unchanged, non-zero).
# Waiting policies: rcl with yield and mcs with spin-then-park (4 threads on
# 2 shared cores: spinning clients would take the server's CPU for whole
# quanta; that is a benchmark subject, not a test).
# Needs libclang's Python bindings (scripts/deps.sh installs python3-clang).
. "$(dirname "$0")/lib.sh" "$@"
liblock="$root/tools/liblock"
export LIBLOCK_BUILD="$build"
libdir="$build/lib"
CC=${CC:-cc}
cc_lib() { "$CC" -O2 -pthread -Iinclude -Itests/transform "$@" -L"$libdir" -llock -Wl,-rpath,"$libdir"; }
# run PROG LOCK ARGS: PROG natively (LOCK=native) or under `liblock run`
run() {
    local prog=$1 lock=$2
    case $lock in
    native) timeout 60 "$prog" "${@:3}" ;;
    rcl) timeout 60 "$liblock" run --lock rcl --wait yield -- "$prog" "${@:3}" ;;
    mcs) timeout 60 "$liblock" run --lock mcs --wait spin-then-park -- "$prog" "${@:3}" ;;
    *) timeout 60 "$liblock" run --lock "$lock" -- "$prog" "${@:3}" ;;
    esac
}
# prun: the same through the environment `liblock run` sets (LD_PRELOAD,
# LIBLOCK_LOCK, LIBLOCK_WAIT, LIBLOCK_STRICT), without starting Python for
# each of the corpus's ~100 runs
prun() {
    local prog=$1 lock=$2 wait=
    case $lock in
    native) timeout 60 "$prog"; return ;;
    rcl) wait=yield ;;
    mcs) wait=spin-then-park ;;
    esac
    env -u LIBLOCK_WAIT LD_PRELOAD="$libdir/liblock-interpose.so" LIBLOCK_LOCK=$lock LIBLOCK_STRICT=1 ${wait:+LIBLOCK_WAIT=$wait} \
        timeout 60 "$prog"
}
LOCKS="native rcl mcs cc-synch"

# ---- liblock_execute_mutex ----------------------------------------------------
if cc_lib tests/transform/execute_mutex.c -o "$tmp/xm"; then
    for lock in $LOCKS; do
        mode=; [ $lock = native ] && mode=local; [ $lock = rcl ] && mode=remote; [ $lock = mcs ] && mode=local
        out=$(run "$tmp/xm" $lock $mode 2>&1)
        rc=$?
        [ $rc -eq 0 ] || fail "execute_mutex under $lock: exit $rc: $out"
    done
    # mcs: every critical section on the caller (lock/call/unlock)
    out=$(timeout 60 "$liblock" run --lock mcs --wait spin-then-park -- "$tmp/xm" local 2>&1) ||
        fail "execute_mutex under mcs ran a section elsewhere: $out"
    out=$(timeout 60 "$liblock" run --lock rcl --wait yield -- "$tmp/xm" remote 2>&1) ||
        fail "execute_mutex under rcl ran a section on the caller: $out"
else
    fail "tests/transform/execute_mutex.c does not compile"
fi

# ---- the corpus -----------------------------------------------------------------
for src in tests/transform/*.c; do
    b=$(basename "$src" .c)
    [ "$b" = execute_mutex ] && continue
    wrap=(); [ "$b" = wrapper ] && wrap=(--wrapper q_lock:q_unlock)
    [ "$b" = wrapper_computed ] && wrap=(--wrapper b_lock:b_unlock g_lock:g_unlock)
    "$liblock" transform "${wrap[@]}" --out "$tmp/out" --report "$tmp/$b.json" "$src" -- -Itests/transform \
            2>"$tmp/$b.err"
    rc=$?
    # expected counts from the first line: "expect: transformed=N refused=M [nested=K]"
    expect=$(head -1 "$src" | sed -n 's/.*expect: \([a-z0-9= ]*\) --.*/\1/p')
    # exit status: 0 when every section was transformed, 1 when some were refused
    want=0; case $expect in *refused=0*) ;; *) want=1 ;; esac
    if [ $rc -ne $want ]; then
        fail "$b: liblock transform exited $rc, expected $want: $(cat "$tmp/$b.err")"; continue
    fi
    got=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["sections"]
c = lambda k: sum(1 for e in s if e["status"] == k)
n = c("nested")
t, r = c("transformed"), c("refused")
print(f"transformed={t} refused={r}" + (f" nested={n}" if n else ""))
for e in s:
    if e["status"] == "refused" and not e.get("reason"):
        print("refused without a reason:", e["site"])
' "$tmp/$b.json")
    [ "$got" = "$expect" ] || fail "$b: report says '$got', expected '$expect'"
    "$CC" -O2 -pthread -Itests/transform "$src" -o "$tmp/$b.orig" || { fail "$b: original does not compile"; continue; }
    cc_lib -Wall -Werror -Wno-unused-parameter -Wno-unused-variable -Wno-unused-function "$tmp/out/$b.c" -o "$tmp/$b.tr" ||
        { fail "$b: transformed file does not compile"; continue; }
    ref=$(run "$tmp/$b.orig" native 2>/dev/null)
    [ -n "$ref" ] || fail "$b: no output"
    for lock in $LOCKS; do
        for v in orig tr; do
            out=$(prun "$tmp/$b.$v" $lock 2>"$tmp/$b.$v.$lock.err")
            rc=$?
            [ $rc -eq 0 ] || fail "$b ($v) under $lock: exit $rc $(head -3 "$tmp/$b.$v.$lock.err")"
            [ "$out" = "$ref" ] || fail "$b ($v) under $lock: output '$out', expected '$ref'"
        done
    done
done

# inputs.c counts on stderr the sections that ran on another thread than their caller
sections=$(( 4 * 1000 ))  # THREADS * ITERS of tests/transform/common.h
r=$(grep -o 'remote [0-9]*' "$tmp/inputs.tr.rcl.err" 2>/dev/null)
[ "$r" = "remote $sections" ] || fail "inputs.c transformed under rcl: '$r', expected 'remote $sections' (sections on the server)"
r=$(grep -o 'remote [0-9]*' "$tmp/inputs.orig.rcl.err" 2>/dev/null)
[ "$r" = "remote 0" ] || fail "inputs.c unmodified under rcl: '$r', expected 'remote 0'"
r=$(grep -o 'remote [0-9]*' "$tmp/inputs.tr.native.err" 2>/dev/null)
[ "$r" = "remote 0" ] || fail "inputs.c transformed natively: '$r', expected 'remote 0'"

# ---- options ------------------------------------------------------------------------
"$liblock" transform --diff tests/transform/nolocals.c -- -Itests/transform >"$tmp/diff" 2>/dev/null
grep -q '^+.*liblock_execute_mutex(&m, __liblock_cs_work_8, NULL)' "$tmp/diff" || fail "--diff: no call site in the diff"
grep -q '^-        pthread_mutex_lock(&m);' "$tmp/diff" || fail "--diff: the lock line is not removed"
"$liblock" transform --only nested.c:10 --report "$tmp/only.json" --out "$tmp/only" tests/transform/nested.c \
    -- -Itests/transform 2>/dev/null
got=$(python3 -c 'import json,sys; print(" ".join(e["site"]+"="+e["status"] for e in json.load(open(sys.argv[1]))["sections"]))' "$tmp/only.json")
[ "$got" = "nested.c:8=skipped nested.c:10=transformed nested.c:14=skipped" ] || fail "--only: $got"
cp tests/transform/nolocals.c tests/transform/common.h "$tmp/"
"$liblock" transform --in-place "$tmp/nolocals.c" 2>/dev/null
grep -q liblock_execute_mutex "$tmp/nolocals.c" || fail "--in-place did not rewrite the file"
"$liblock" transform --wrapper nocolon tests/transform/nolocals.c >/dev/null 2>&1 && fail "--wrapper without ':' accepted"
printf 'int f(void) { return undeclared; }\n' >"$tmp/bad.c"
cp "$tmp/bad.c" "$tmp/bad.orig"
"$liblock" transform --in-place "$tmp/bad.c" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "a file that does not compile: exit $rc, expected 2"
cmp -s "$tmp/bad.c" "$tmp/bad.orig" || fail "a file that does not compile was changed"

finish
