#!/usr/bin/env bash
# test_interpose.sh BUILD - real programs under the interposer, and `liblock run`.
#
#  - `liblock run`: an unknown lock name (one line listing the valid names,
#    non-zero, the program is not started), a missing program (one line,
#    non-zero), no program, an unsupported waiting policy, and a program's
#    exit status passed through; --cond mostly-lifo and glibc run, a bad
#    LIBLOCK_COND gives one line and runs; --sem alone, with
#    --lock, with a bad kind; a bad LIBLOCK_SEM (fallback or exit 127);
#    python3 (its locks are POSIX semaphores) under --sem with a bounded
#    queue and timed acquires;
#  - memcached (Debian package) started with `liblock run` under EVERY
#    algorithm of build/bin/liblock-info, 4, 8 or 16 worker threads in turn,
#    loopback only, driven by memcslap (set, then get); checks: the
#    interposer is mapped into memcached, memcslap exits 0 without errors,
#    memcached's own counters are exact (every get a hit, the number of gets
#    and sets as requested), memcached exits on SIGTERM;
#  - kccachetest (Debian package kyotocabinet-utils) with 8 and 32 threads
#    under every algorithm: `order -rnd -etc` and `wicked`, each of which
#    checks its own results; must exit 0 and print "ok".
# Waiting policy per algorithm: spin-then-park, else park, else yield (with
# more threads than the 2 cores, a pure-spin FIFO lock advances one hand-off
# per scheduler quantum; that is a benchmark subject, not a test).
# Packages: scripts/deps.sh installs them (LIBLOCK_TEST_DEPS); if they are
# still missing this test fails rather than skipping silently.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
liblock="$root/tools/liblock"
export LIBLOCK_BUILD="$root/$build"
lib="$root/$build/lib/liblock-interpose.so"
info="$root/$build/bin/liblock-info"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails+1)); }
tmp=$(mktemp -d)
mc_pid=
cleanup() { [ -n "$mc_pid" ] && kill -9 "$mc_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

for p in memcached memcslap memcstat kccachetest; do
  command -v "$p" >/dev/null || { echo "FAIL: $p is not installed (scripts/deps.sh installs it)"; exit 1; }
done
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }

# ---- liblock run -------------------------------------------------------------
out=$("$liblock" run --lock no-such-lock -- touch "$tmp/started" 2>&1); rc=$?
[ $rc -ne 0 ] || fail "run with a bad lock name exited 0"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "bad lock name: not one line: $out"
case "$out" in *"no-such-lock"*mcs*) ;; *) fail "bad lock name: message does not name it and list valid ones: $out";; esac
[ ! -e "$tmp/started" ] || fail "bad lock name: the program was started"
out=$("$liblock" run --lock mcs -- "$tmp/no-such-program" 2>&1); rc=$?
[ $rc -ne 0 ] || fail "run with a missing program exited 0"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "missing program: not one line: $out"
case "$out" in *no-such-program*) ;; *) fail "missing program: message does not name it: $out";; esac
out=$("$liblock" run --lock mcs 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "no program: rc=$rc out=$out"
out=$("$liblock" run --lock ticket --wait park -- touch "$tmp/started" 2>&1); rc=$?
[ $rc -ne 0 ] && [ ! -e "$tmp/started" ] || fail "unsupported policy: rc=$rc out=$out"
"$liblock" run --lock mcs -- sh -c 'exit 7'; rc=$?
[ $rc -eq 7 ] || fail "exit status not passed through: got $rc, expected 7"
{ "$liblock" run --lock ttas -- sh -c 'kill -TERM $$'; } 2>/dev/null; rc=$?
[ $rc -eq 143 ] || fail "death by signal not passed through: got $rc, expected 143"
out=$("$liblock" run --lock mcs --wait spin-then-park -- sh -c 'echo "$LIBLOCK_LOCK $LIBLOCK_WAIT $LD_PRELOAD"'); rc=$?
[ $rc -eq 0 ] && [ "$out" = "mcs spin-then-park $lib" ] || fail "environment of the program: '$out'"
# ---- the interposer's own configuration errors ---------------------------------
out=$(env LD_PRELOAD="$lib" LIBLOCK_LOCK=no-such-lock sh -c 'echo ran' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = ran ] || fail "bad LIBLOCK_LOCK without LIBLOCK_STRICT: rc=$rc out=$out (expected the program to run on glibc)"
[ "$(grep -c 'liblock-interpose: unknown LIBLOCK_LOCK' "$tmp/err")" -ge 1 ] && grep -q 'valid: .*mcs' "$tmp/err" ||
  fail "bad LIBLOCK_LOCK: no one-line message listing the valid names: $(cat "$tmp/err")"
out=$(env LD_PRELOAD="$lib" LIBLOCK_LOCK=no-such-lock LIBLOCK_STRICT=1 sh -c 'echo ran' 2>"$tmp/err"); rc=$?
[ $rc -eq 127 ] && [ -z "$out" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "bad LIBLOCK_LOCK with LIBLOCK_STRICT=1: rc=$rc out=$out err=$(cat "$tmp/err")"
out=$(env LD_PRELOAD="$lib" LIBLOCK_LOCK=ticket LIBLOCK_WAIT=park sh -c 'echo ran' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = ran ] && grep -q "not supported by 'ticket'" "$tmp/err" || fail "unsupported LIBLOCK_WAIT: rc=$rc err=$(cat "$tmp/err")"
out=$("$liblock" run --lock mcs --cond mostly-lifo -- sh -c 'echo "ran $LIBLOCK_COND"' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = "ran mostly-lifo" ] && [ ! -s "$tmp/err" ] || fail "--cond mostly-lifo: rc=$rc out=$out err=$(cat "$tmp/err")"
out=$("$liblock" run --lock mcs --cond glibc -- sh -c 'echo "ran $LIBLOCK_COND"' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = "ran glibc" ] && [ ! -s "$tmp/err" ] || fail "--cond glibc: rc=$rc out=$out err=$(cat "$tmp/err")"
out=$(env LD_PRELOAD="$lib" LIBLOCK_LOCK=mcs LIBLOCK_COND=bogus sh -c 'echo ran' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = ran ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "valid: fifo mostly-lifo glibc" "$tmp/err" ||
  fail "bad LIBLOCK_COND: rc=$rc out=$out err=$(cat "$tmp/err")"
# semaphores: --sem alone (mutexes stay glibc's), with a lock, and a bad kind
out=$("$liblock" run --sem mostly-lifo -- sh -c 'echo "[${LIBLOCK_LOCK-unset}] $LIBLOCK_SEM"' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = "[unset] mostly-lifo" ] && [ ! -s "$tmp/err" ] || fail "--sem alone: rc=$rc out=$out err=$(cat "$tmp/err")"
out=$("$liblock" run --lock mcs --sem fifo -- sh -c 'echo "$LIBLOCK_LOCK $LIBLOCK_SEM"' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = "mcs fifo" ] || fail "--lock with --sem: rc=$rc out=$out err=$(cat "$tmp/err")"
out=$("$liblock" run --lock mcs --sem no-such-kind -- touch "$tmp/started" 2>&1); rc=$?
[ $rc -ne 0 ] && [ ! -e "$tmp/started" ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
  case "$out" in *no-such-kind*mostly-lifo*) true;; *) false;; esac || fail "bad --sem kind: rc=$rc out=$out"
out=$("$liblock" run -- touch "$tmp/started" 2>&1); rc=$?
[ $rc -ne 0 ] && [ ! -e "$tmp/started" ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "neither --lock nor --sem: rc=$rc out=$out"
out=$(env LD_PRELOAD="$lib" LIBLOCK_SEM=no-such-kind sh -c 'echo ran' 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = ran ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "unknown LIBLOCK_SEM 'no-such-kind'" "$tmp/err" ||
  fail "bad LIBLOCK_SEM without LIBLOCK_STRICT: rc=$rc out=$out err=$(cat "$tmp/err")"
out=$(env LD_PRELOAD="$lib" LIBLOCK_SEM=no-such-kind LIBLOCK_STRICT=1 sh -c 'echo ran' 2>"$tmp/err"); rc=$?
[ $rc -eq 127 ] && [ -z "$out" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "bad LIBLOCK_SEM with LIBLOCK_STRICT=1: rc=$rc out=$out err=$(cat "$tmp/err")"
# a real program whose locks are POSIX semaphores: CPython (threading.Lock,
# queue.Queue use sem_init/sem_wait/sem_clockwait/sem_post); items through a
# bounded queue exactly once, timed acquires time out; the binding of
# sem_wait to the interposer is checked with the dynamic linker's trace
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
cat >"$tmp/sem.py" <<'PYEOF'
import ctypes, queue, sys, threading
N, P = 3000, 3
q, out, lk = queue.Queue(maxsize=4), [], threading.Lock()
def prod(b):
    for i in range(N): q.put(b * N + i)
def cons():
    while (v := q.get()) is not None:
        with lk: out.append(v)
ts = [threading.Thread(target=prod, args=(b,)) for b in range(P)] + [threading.Thread(target=cons) for _ in range(P)]
for t in ts: t.start()
for t in ts[:P]: t.join()
for _ in range(P): q.put(None)
for t in ts[P:]: t.join()
assert sorted(out) == list(range(P * N)), "items lost or duplicated"
l = threading.Lock(); l.acquire()
assert l.acquire(timeout=0.02) is False
s = threading.Semaphore(0)
assert s.acquire(timeout=0.02) is False
f = ctypes.CDLL(None).liblock_interpose_sem
f.restype = ctypes.c_char_p
print(f().decode())
PYEOF
for cfg in "mcs mostly-lifo" "posix fifo"; do # spin-then-park: 6 threads + the GIL on 2 cores
  read -r algo kind <<<"$cfg"
  out=$(LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/ld" timeout 60 "$liblock" run --lock "$algo" --wait spin-then-park --sem "$kind" -- "$py" "$tmp/sem.py" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ "$out" = "$kind" ] || fail "python3 with --lock $algo --sem $kind: rc=$rc out=$(printf '%s' "$out" | tail -3)"
  cat "$tmp"/ld.* 2>/dev/null | grep -q "to $lib .*normal symbol .sem_wait'" || fail "python3 with --sem $kind: sem_wait not bound to the interposer"
  rm -f "$tmp"/ld.*
done
echo "liblock run: checks done"

# ---- algorithms and policies ----------------------------------------------------
mapfile -t algos < <("$info" | python3 -c '
import json, sys
for line in sys.stdin:
    a = json.loads(line)
    pol = next((p for p in ("spin-then-park", "park", "yield") if p in a["policies"]), "")
    print(a["name"], pol)')
[ ${#algos[@]} -gt 0 ] || { echo "FAIL: no algorithms from $info"; exit 1; }

# ---- memcached + memcslap ----------------------------------------------------------
port=$((20000 + $$ % 20000))
stat() { memcstat --servers=127.0.0.1:$port 2>/dev/null | awk -v k="$1" '$1 == k":" {print $2}'; }
i=0
for entry in "${algos[@]}"; do
  read -r algo pol <<<"$entry"
  threads=(4 8 16); t=${threads[$((i % 3))]}; i=$((i+1))
  start=$(date +%s.%N)
  wait_opt=(); [ -n "$pol" ] && wait_opt=(--wait "$pol")
  up=0
  for attempt in 1 2 3 4 5; do # another program may hold the port: try the next one
    "$liblock" run --lock "$algo" "${wait_opt[@]}" -- memcached -t "$t" -p "$port" -U 0 -l 127.0.0.1 -u root -m 64 \
        >"$tmp/mc.out" 2>&1 &
    mc_pid=$!
    for _ in $(seq 100); do
      if memcstat --servers=127.0.0.1:$port >/dev/null 2>&1 && sleep 0.1 && kill -0 "$mc_pid" 2>/dev/null; then up=1; break; fi
      kill -0 "$mc_pid" 2>/dev/null || break
      sleep 0.05
    done
    [ $up -eq 1 ] && break
    kill -9 "$mc_pid" 2>/dev/null; wait "$mc_pid" 2>/dev/null
    grep -q 'Address already in use' "$tmp/mc.out" || break
    port=$((port + 7))
  done
  if [ $up -ne 1 ]; then fail "memcached under $algo did not start: $(head -3 "$tmp/mc.out")"; kill -9 $mc_pid 2>/dev/null; wait $mc_pid 2>/dev/null; mc_pid=; port=$((port+1)); continue; fi
  grep -q liblock-interpose.so "/proc/$mc_pid/maps" || fail "memcached under $algo: interposer not mapped"
  c=4; e=200
  timeout 60 memcslap -s 127.0.0.1:$port -t set -c $c -e $e >"$tmp/set.out" 2>&1 || fail "memcslap set under $algo: exit $? $(tail -2 "$tmp/set.out")"
  timeout 60 memcslap -s 127.0.0.1:$port -t get -c $c -e $e >"$tmp/get.out" 2>&1 || fail "memcslap get under $algo: exit $? $(tail -2 "$tmp/get.out")"
  grep -qiE 'error|fail' "$tmp/set.out" "$tmp/get.out" && fail "memcslap under $algo reported: $(grep -hiE 'error|fail' "$tmp/set.out" "$tmp/get.out" | head -2)"
  hits=$(stat get_hits); misses=$(stat get_misses); gets=$(stat cmd_get); sets=$(stat cmd_set); thr=$(stat threads)
  # get test: c*e gets of keys it loaded first (e keys); set test: c*e sets
  [ "$gets" = $((c * e)) ] && [ "$hits" = $((c * e)) ] && [ "$misses" = 0 ] && [ "$sets" = $((c * e + e)) ] && [ "$thr" = "$t" ] ||
    fail "memcached under $algo: threads=$thr cmd_get=$gets get_hits=$hits get_misses=$misses cmd_set=$sets (expected $t, $((c*e)), $((c*e)), 0, $((c*e+e)))"
  kill -TERM "$mc_pid"
  for _ in $(seq 100); do kill -0 "$mc_pid" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$mc_pid" 2>/dev/null; then fail "memcached under $algo did not exit on SIGTERM"; kill -9 "$mc_pid"; fi
  wait "$mc_pid" 2>/dev/null
  mc_pid=
  printf 'memcached  %-16s %-15s %2d threads: ok (%.1f s)\n' "$algo" "${pol:-default}" "$t" "$(echo "$(date +%s.%N) - $start" | bc)"
done

# ---- kccachetest --------------------------------------------------------------------
for entry in "${algos[@]}"; do
  read -r algo pol <<<"$entry"
  start=$(date +%s.%N)
  for th in 8 32; do
    for args in "order -th $th -rnd -etc 600" "wicked -th $th 600"; do
      env LD_PRELOAD="$lib" LIBLOCK_LOCK="$algo" ${pol:+LIBLOCK_WAIT=$pol} LIBLOCK_STRICT=1 \
          timeout 60 kccachetest $args >"$tmp/kc.out" 2>&1; rc=$?
      [ $rc -eq 0 ] && [ "$(grep -v "^$" "$tmp/kc.out" | tail -n 1)" = "ok" ] || fail "kccachetest $args under $algo: exit $rc, $(tail -n 2 "$tmp/kc.out" | tr '\n' ' ')"
    done
  done
  printf 'kccachetest %-16s %-15s 8,32 threads: ok (%.1f s)\n' "$algo" "${pol:-default}" "$(echo "$(date +%s.%N) - $start" | bc)"
done

[ $fails -eq 0 ] && echo "test_interpose.sh: all checks passed" || echo "test_interpose.sh: $fails failure(s)"
[ $fails -eq 0 ]
