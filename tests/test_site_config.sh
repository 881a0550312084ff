#!/usr/bin/env bash
# test_site_config.sh BUILD - per-site configuration (LIBLOCK_CONFIG; the
# format in docs/interpose.md "Per-site configuration") under the
# interposer, on tests/profile_prog.c's `sites` mode: two mutexes from two
# init sites and a static mutex, each locked by two threads.
#  - by FILE:LINE and by static symbol: the three locks get three different
#    algorithms (LIBLOCK_DEBUG_SITES=1 prints each lock's site and algorithm),
#    and the program's counter is exact;
#  - by site id (taken from that output) plus a default line; LIBLOCK_LOCK
#    with a file sets the default;
#  - three queue locks with three node layouts (mcscr, loiter, mcs): exact;
#  - a combining lock beside a classic one (the mixed case of
#    ll_may_run_foreign), and rcl with server=CPU: exact counter;
#  - under the profiler: lock "config" and exact acquisitions;
#  - every malformed line (including a FILE:LINE key whose line is past
#    INT_MAX, and a NUL byte, which would silently cut the line short):
#    exactly one line `liblock: FILE:LINE: problem`,
#    exit status 2, the program not started; build/bin/liblock-config-check
#    prints the same line and exits 2 (0 for a valid file).
. "$(dirname "$0")/lib.sh" "$@"
lib="$build/lib/liblock-interpose.so"
plib="$build/lib/liblock-profile.so"
check="$build/bin/liblock-config-check"
for f in "$lib" "$plib" "$check"; do [ -e "$f" ] || { echo "FAIL: $f missing (make)"; exit 1; }; done
cc -g -O1 -pthread tests/profile_prog.c -o "$tmp/prog" || { echo "FAIL: cannot build profile_prog"; exit 1; }
run() { timeout 60 env LD_PRELOAD="$lib" LIBLOCK_STRICT=1 "$@"; }

# the source lines of the two init calls
"$tmp/prog" sites > "$tmp/plain.out" || fail "plain run"
l1=$(sed -n 's/^l_site1=//p' "$tmp/plain.out"); l2=$(sed -n 's/^l_site2=//p' "$tmp/plain.out")
grep -q '^site_counter=12000$' "$tmp/plain.out" || fail "plain counter"

mapping() { # FILE -> "site1 site2 static" algorithms from the debug lines
  local a b c
  # (two threads may both set up the static mutex at its first use: one line each)
  a=$(sed -n "s/^liblock: site [0-9a-f]* profile_prog.c:$l1 -> //p" "$1" | head -1)
  b=$(sed -n "s/^liblock: site [0-9a-f]* profile_prog.c:$l2 -> //p" "$1" | head -1)
  c=$(sed -n "s/^liblock: site [0-9a-f]* site_static -> //p" "$1" | sort -u)
  echo "$a $b $c"
}

printf '# two init sites and a static mutex\nsite profile_prog.c:%s mcs wait=spin-then-park\nsite profile_prog.c:%s ticket   # by line\n\nsite site_static clh\n' "$l1" "$l2" > "$tmp/c1"
run LIBLOCK_CONFIG="$tmp/c1" LIBLOCK_DEBUG_SITES=1 "$tmp/prog" sites > "$tmp/o1" 2> "$tmp/e1" || fail "config 1: exit $?"
[ "$(mapping "$tmp/e1")" = "mcs ticket clh" ] || fail "config 1 mapping: $(mapping "$tmp/e1") ($(cat "$tmp/e1"))"
grep -q '^site_counter=12000$' "$tmp/o1" || fail "config 1 counter: $(cat "$tmp/o1")"

id1=$(sed -n "s/^liblock: site \([0-9a-f]*\) profile_prog.c:$l1 -> .*/\1/p" "$tmp/e1")
printf 'default posix\nsite %s ttas\n' "$id1" > "$tmp/c2"
run LIBLOCK_CONFIG="$tmp/c2" LIBLOCK_DEBUG_SITES=1 "$tmp/prog" sites > "$tmp/o2" 2> "$tmp/e2" || fail "config 2: exit $?"
[ "$(mapping "$tmp/e2")" = "ttas posix posix" ] || fail "config 2 (by id $id1 + default): $(mapping "$tmp/e2")"
run LIBLOCK_CONFIG="$tmp/c2" LIBLOCK_LOCK=clh LIBLOCK_DEBUG_SITES=1 "$tmp/prog" sites > /dev/null 2> "$tmp/e3" || fail "config 3: exit $?"
[ "$(mapping "$tmp/e3")" = "ttas clh clh" ] || fail "LIBLOCK_LOCK with a config is not the default: $(mapping "$tmp/e3")"

printf 'site profile_prog.c:%s cc-synch\nsite profile_prog.c:%s mcs\nsite site_static rcl server=0\n' "$l1" "$l2" > "$tmp/c4"
run LIBLOCK_CONFIG="$tmp/c4" LIBLOCK_DEBUG_SITES=1 "$tmp/prog" sites > "$tmp/o4" 2> "$tmp/e4" || fail "config 4: exit $?"
[ "$(mapping "$tmp/e4")" = "cc-synch mcs rcl" ] || fail "config 4 mapping: $(mapping "$tmp/e4")"
grep -q '^site_counter=12000$' "$tmp/o4" || fail "config 4 (combining + classic + rcl) counter: $(cat "$tmp/o4")"

# each thread's cached node goes mcscr -> loiter -> mcs -> mcscr ...: the
# shim hands a node only to its own algorithm (internal.h, "One algorithm
# per node"); the late store this prevents is caught by ThreadSanitizer in
# test_node_reuse (API level), here the counter must stay exact
printf 'site profile_prog.c:%s mcscr\nsite profile_prog.c:%s loiter\nsite site_static mcs\n' "$l1" "$l2" > "$tmp/c5"
run LIBLOCK_CONFIG="$tmp/c5" LIBLOCK_DEBUG_SITES=1 "$tmp/prog" sites > "$tmp/o5" 2> "$tmp/e5" || fail "config 5: exit $?"
[ "$(mapping "$tmp/e5")" = "mcscr loiter mcs" ] || fail "config 5 mapping: $(mapping "$tmp/e5")"
grep -q '^site_counter=12000$' "$tmp/o5" || fail "config 5 (three node layouts) counter: $(cat "$tmp/o5")"

timeout 60 env LD_PRELOAD="$plib" LIBLOCK_PROFILE_OUT="$tmp/p.json" LIBLOCK_CONFIG="$tmp/c1" "$tmp/prog" sites > /dev/null || fail "profiler with a config"
python3 - "$tmp/p.json" <<'PY' || fails=$((fails+1))
import json, sys
d = json.load(open(sys.argv[1]))
a = sorted(i['acquisitions'] for s in d['sites'] for i in s['instances'])
ok = d['lock'] == 'config' and a == [4000, 4000, 4000]
if not ok: print('FAIL: profiler with a config: lock %r acquisitions %r' % (d['lock'], a))
sys.exit(0 if ok else 1)
PY

"$check" "$tmp/c1" || fail "liblock-config-check rejects a valid file"
# ---- malformed files: LINE|content|what the message must contain ------------------------
n=0
while IFS='|' read -r line content want; do
  n=$((n+1)); f="$tmp/bad$n"
  printf '# bad file %s\n%b\n' "$n" "$content" > "$f"
  out=$(run LIBLOCK_CONFIG="$f" "$tmp/prog" sites 2>&1); rc=$?
  [ $rc -eq 2 ] || fail "bad line '$content': exit $rc, expected 2"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "bad line '$content': not one line: $out"
  case "$out" in "liblock: $f:$line: "*"$want"*) ;; *) fail "bad line '$content': message '$out' (want '$f:$line: ...$want')";; esac
  out2=$("$check" "$f" 2>&1); rc2=$?
  [ $rc2 -eq 2 ] && [ "$out2" = "$out" ] || fail "liblock-config-check on '$content': exit $rc2, '$out2'"
done <<'EOF'
2|frobnicate x|unknown directive 'frobnicate'
2|site a.c:3 no-such-lock|unknown algorithm 'no-such-lock'
2|default|default needs an algorithm
2|site a.c:3|site needs a KEY and an algorithm
2|site a.c:x mcs|bad site key 'a.c:x'
2|site my-lock mcs|bad site key 'my-lock'
2|site a.c:3 mcs wait=forever|unknown waiting policy 'forever'
2|site a.c:3 ticket wait=park|not supported by 'ticket'
2|site a.c:3 mcs server=0|server= applies only to rcl
2|site a.c:3 rcl server=99999|bad server CPU '99999'
2|site a.c:3 mcs color=red|unexpected 'color=red'
2|site a.c:3 glibc wait=spin|wait= does not apply to glibc
3|default mcs\ndefault ticket|second default line (first on line 2)
2|site a.c:3 glibc wait=spin|wait= does not apply to glibc
3|default mcs\ndefault ticket|second default line (first on line 2)
2|site a.c:2147483648 mcs|bad site key 'a.c:2147483648' (line number past 2147483647)
2|site a.c:99999999999999999999 mcs|bad site key 'a.c:99999999999999999999' (line number past
3|site a.c:2147483647 mcs\nsite b.c:3 mcs\0 color=red|NUL byte in the line
2|default mcs\0|NUL byte in the line
EOF
out=$(run LIBLOCK_CONFIG="$tmp/missing" "$tmp/prog" sites 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$out" = "liblock: $tmp/missing: cannot open (No such file or directory)" ] || fail "missing file: $rc '$out'"

finish
