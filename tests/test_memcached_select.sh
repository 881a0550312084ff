#!/usr/bin/env bash
# test_memcached_select.sh BUILD - the site selection of `liblock bench apps
# memcached` (tools/liblock_cli/_memcached.py: ranked_locks, hot_sites,
# select_sections), on tests/memcached_select/mini.c, a miniature of
# memcached's locking (its header says what each piece stands for), without
# memcached:
#  - a `liblock profile --json` fixture of mini.c (profile.json, real shape):
#    locks ranked by cs_share, --top-locks 1/2/4 give the exact --only lists;
#    the wrapper's call site (mini.c:30, inside b_lock) selects every section
#    locked through b_lock, store() is left out with its reason, count_set()
#    is refused by the transform (pthread_getspecific), the trylock and the
#    wrapper line are reported as call sites with no section, a library's
#    module+offset site is ignored; a JSON without cs_share keeps its order;
#  - the selection transformed (--only), built with liblock.so and run
#    natively, under rcl and under mcs: output identical to the original;
#    with store() transformed too, the output under rcl differs (the reason it
#    is left out without identity is real, and this test can see it), and
#    with LIBLOCK_IDENTITY=1 it is the original's again (why the bench
#    transforms memcached's store_item and add_delta with identity on), as
#    under `liblock run --lock rcl`, which sets it;
#  - mini.c profiled now (cc -O0 -g): its top lock selects the same sections.
# Needs libclang's Python bindings (as test_transform.sh).
. "$(dirname "$0")/lib.sh" "$@"
liblock="$root/tools/liblock"
export LIBLOCK_BUILD="$build"
libdir="$build/lib"
CC=${CC:-cc}
mkdir -p "$tmp/tree" "$tmp/out"
cp tests/memcached_select/mini.c "$tmp/tree/"

# pick PROFILE TOP: prints the selection as JSON
pick() {
    python3 - "$1" "$2" "$tmp/tree" "$liblock" <<'PY'
import json, sys
sys.path.insert(0, "tools")
from liblock_cli import _memcached as M
profile, top, tree, tool = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sites = M.hot_sites(profile, top)
sel = M.select_sections(sites, tree, ["b_lock:b_unlock"], [], {"store": "reaches per-thread data through note()"}, tool)
print(json.dumps({"sites": sites, "only": sel["only"], "files": sel["files"],
                  "left_out": [[e["site"], e["function"], why] for e, why in sel["left_out"]],
                  "refused": [[e["site"], e["reason"]] for e in sel["sections"] if e["status"] == "refused"],
                  "unmatched": [s for s, _ in sel["unmatched"]]}))
PY
}
# check JSON PYTHON-EXPR MESSAGE
check() {
    python3 -c 'import json, sys; s = json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" ||
        fail "$3: $1"
}

fx=tests/memcached_select/profile.json
s1=$(pick $fx 1) || fail "selection, --top-locks 1"
check "$s1" 's["sites"] == ["mini.c:30", "mini.c:41"]' "top 1: the bucket locks' call sites"
check "$s1" 's["only"] == ["mini.c:61", "mini.c:69"]' "top 1: get and put through the wrapper"
check "$s1" 's["left_out"] == [["mini.c:76", "store", "reaches per-thread data through note()"]]' "top 1: store left out"
check "$s1" 's["unmatched"] == ["mini.c:30", "mini.c:41"] and s["refused"] == []' "top 1: the wrapper line and the trylock"
s2=$(pick $fx 2) || fail "selection, --top-locks 2"
check "$s2" 's["only"] == ["mini.c:61", "mini.c:69", "mini.c:84"]' "top 2: + count_get"
check "$s2" 'len(s["refused"]) == 1 and s["refused"][0][0] == "mini.c:91" and "pthread_getspecific" in s["refused"][0][1]' \
    "top 2: count_set refused for its thread-local data"
s4=$(pick $fx 4) || fail "selection, --top-locks 4"
check "$s4" 's["only"] == ["mini.c:61", "mini.c:69", "mini.c:84", "mini.c:100"]' "top 4: + other (the libevent lock ignored)"
check "$s4" 'not any("+0x" in x for x in s["sites"]) and s["files"] == ["mini.c"]' "top 4: no module+offset site"
# the hand-written shape: no cs_share, the order of the file is the ranking
python3 - "$fx" "$tmp/plain.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
locks = [{"site": l["site"], "call_sites": [{"site": c["site"]} for c in l["call_sites"]]} for l in d["locks"]][::-1]
json.dump({"locks": locks}, open(sys.argv[2], "w"))
PY
s0=$(pick "$tmp/plain.json" 1) || fail "selection from a JSON without cs_share"
check "$s0" 's["only"] == ["mini.c:100"]' "no cs_share: the file's first lock"
echo '{"locks": [{"site": "x", "call_sites": [{"site": "libfoo.so+0x10"}]}]}' >"$tmp/none.json"
if out=$(pick "$tmp/none.json" 0 2>&1); then fail "a profile with no FILE.c:LINE call site was accepted: $out"; fi

# ---- the selection transformed, built, run ---------------------------------------
only=$(python3 -c 'import json, sys; print(" ".join(json.loads(sys.argv[1])["only"]))' "$s2")
cc_lib() { "$CC" -O2 -pthread -Iinclude "$@" -L"$libdir" -llock -Wl,-rpath,"$libdir"; }
run() { # PROG LOCK
    case $2 in
    native) timeout 60 "$1" ;;
    rcl) env LD_PRELOAD="$libdir/liblock-interpose.so" LIBLOCK_LOCK=rcl LIBLOCK_WAIT=yield LIBLOCK_STRICT=1 timeout 60 "$1" ;;
    mcs) env LD_PRELOAD="$libdir/liblock-interpose.so" LIBLOCK_LOCK=mcs LIBLOCK_WAIT=spin-then-park LIBLOCK_STRICT=1 timeout 60 "$1" ;;
    esac
}
"$CC" -O2 -pthread tests/memcached_select/mini.c -o "$tmp/orig" || fail "mini.c does not compile"
ref=$(run "$tmp/orig" native)
[ -n "$ref" ] || fail "mini: no output"
# shellcheck disable=SC2086
if (cd "$tmp/tree" && "$liblock" transform --only $only --wrapper b_lock:b_unlock --out "$tmp/out" --report "$tmp/r.json" \
        mini.c 2>"$tmp/tr.err"); then
    n=$(python3 -c 'import json, sys; print(sum(e["status"] == "transformed" for e in json.load(open(sys.argv[1]))["sections"]))' "$tmp/r.json")
    [ "$n" = 3 ] || fail "transform --only $only: $n sections transformed, expected 3"
    if cc_lib "$tmp/out/mini.c" -o "$tmp/tr"; then
        for lock in native rcl mcs; do
            out=$(run "$tmp/tr" $lock 2>&1)
            [ "$out" = "$ref" ] || fail "transformed mini under $lock: '$out', expected '$ref'"
        done
    else
        fail "the transformed mini.c does not compile"
    fi
else
    fail "liblock transform --only $only: $(cat "$tmp/tr.err")"
fi
# store() transformed too: delegated, note() runs on the server's thread
# shellcheck disable=SC2086
if (cd "$tmp/tree" && "$liblock" transform --only $only mini.c:76 --wrapper b_lock:b_unlock --out "$tmp/out2" \
        mini.c 2>/dev/null) && cc_lib "$tmp/out2/mini.c" -o "$tmp/tr2"; then
    out=$(run "$tmp/tr2" rcl 2>&1)
    [ "$out" != "$ref" ] || fail "with store() delegated the output under rcl is unchanged ('$out'): the left-out reason is not seen"
    # ... and with the caller's identity (LIBLOCK_IDENTITY=1, the bench's default) note() is the caller's again
    out=$(LIBLOCK_IDENTITY=1 run "$tmp/tr2" rcl 2>&1)
    [ "$out" = "$ref" ] || fail "with store() delegated under rcl and LIBLOCK_IDENTITY=1: '$out', expected '$ref'"
    # `liblock run` sets it by default
    out=$(env -u LIBLOCK_IDENTITY timeout 60 "$liblock" run --lock rcl --wait yield -- "$tmp/tr2" 2>&1)
    [ "$out" = "$ref" ] || fail "with store() delegated under liblock run --lock rcl: '$out', expected '$ref'"
else
    fail "mini.c with store() transformed does not build"
fi

# ---- mini.c profiled now ----------------------------------------------------------
"$CC" -O0 -g -pthread tests/memcached_select/mini.c -o "$tmp/mini0" || fail "mini.c -O0 -g does not compile"
if "$liblock" profile --json "$tmp/p.json" -- "$tmp/mini0" >/dev/null 2>"$tmp/p.err"; then
    sp=$(pick "$tmp/p.json" 1) || fail "selection from a fresh profile"
    check "$sp" 's["only"] == ["mini.c:61", "mini.c:69"] and [x[0] for x in s["left_out"]] == ["mini.c:76"]' \
        "fresh profile, top 1: the bucket sections through b_lock"
else
    fail "liblock profile of mini: $(tail -3 "$tmp/p.err")"
fi

finish
