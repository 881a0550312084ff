#!/usr/bin/env bash
# test_profile.sh BUILD - the profiler runtime (build/lib/liblock-profile.so)
# on tests/profile_prog.c, a program with locks of known character (compiled
# here with -g), through LD_PRELOAD and LIBLOCK_PROFILE_OUT; the raw JSON
# report (docs/profile-runtime.md) is checked with python3 against what the
# program says it did:
#  - exact acquisitions: hot lock (4 threads x 20000), light lock (100),
#    5 locks from one init site (count 5, 1..5 acquisitions each), a static
#    mutex (by symbol, first lock site), one lock from two call sites
#    (3 + 5, each resolved to its file:line), a recursive mutex (4
#    outermost, 8 relocks), trylock failures (6), condition waits (as many
#    as the program made), a holder waiting on a condition variable while
#    another thread takes the mutex (its call site keeps its whole hold,
#    the wait excluded), a thread that exits early (10), C11 mtx (init
#    and call site lines), the number of threads; sites resolved to the
#    file:line of their init call; site ids stable across two runs;
#  - the program's output and exit status are unchanged (status 3);
#  - under LIBLOCK_LOCK=mcs the same exact counts, lock "mcs";
#  - LIBLOCK_PROFILE_ONLY=ID records that site only;
#  - fork: the parent's report and the child's (PATH.PID), both exact;
#  - abort(): the report is written, the exit status is the signal's (134);
#    _exit(5): written, status 5; SIGUSR1: a snapshot PATH.usr1.1 and the
#    program goes on;
#  - without LIBLOCK_PROFILE_OUT: one line on stderr, no report, same output;
#  - a profiled process started by another profiled one (sh -c) writes
#    PATH.PID, the first one PATH;
#  - the interposer's own semantic test (every program of its mutex test,
#    as `build/tests/test_interpose --topics` lists them, in its child mode:
#    counters, every mutex type, timed locks, condvars, C11, fork) passes
#    under the profiler with LIBLOCK_LOCK=mcs: the profiler's build of the
#    shim behaves as the interposer's.
. "$(dirname "$0")/lib.sh" "$@"
lib="$build/lib/liblock-profile.so"
[ -f "$lib" ] || { echo "FAIL: $lib missing (make)"; exit 1; }
cc -g -O1 -pthread tests/profile_prog.c -o "$tmp/profile_prog" || { echo "FAIL: cannot build profile_prog"; exit 1; }
prog="$tmp/profile_prog"
prof() { timeout 60 env LD_PRELOAD="$lib" LIBLOCK_PROFILE_OUT="$1" "${@:2}"; }

# ---- basic: output and status unchanged, exact counts ------------------------------
timeout 60 "$prog" basic > "$tmp/plain.out"; rc_plain=$?
prof "$tmp/b.json" "$prog" basic > "$tmp/prof.out" 2> "$tmp/prof.err"; rc_prof=$?
[ $rc_plain -eq 3 ] && [ $rc_prof -eq 3 ] || fail "exit status changed: plain $rc_plain, profiled $rc_prof (expected 3)"
same() { cmp -s <(grep -v '^cond_calls=' "$1") <(grep -v '^cond_calls=' "$2"); } # the number of condition waits depends on scheduling
same "$tmp/plain.out" "$tmp/prof.out" || fail "program output changed under the profiler"
[ -s "$tmp/prof.err" ] && fail "profiler wrote to stderr: $(head -2 "$tmp/prof.err")"
prof "$tmp/b2.json" "$prog" basic > "$tmp/prof2.out"
timeout 60 env LD_PRELOAD="$lib" LIBLOCK_PROFILE_OUT="$tmp/m.json" LIBLOCK_LOCK=mcs LIBLOCK_STRICT=1 "$prog" basic > "$tmp/mcs.out"
same "$tmp/plain.out" "$tmp/mcs.out" || fail "program output changed under the profiler with LIBLOCK_LOCK=mcs"

cat > "$tmp/check.py" <<'PY'
import json, sys
out, path, path2, lock = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
kv = dict(l.strip().split('=', 1) for l in open(out) if '=' in l)
kv = {k: int(v) for k, v in kv.items()}
d = json.load(open(path))
bad = []
def check(c, msg):
    if not c: bad.append(msg)
check(d['format'] == 'liblock-profile-raw/1', 'format')
check(d['lock'] == lock, 'lock %s, expected %s' % (d['lock'], lock))
check(d['threads'] == kv['threads'], 'threads %d, expected %d' % (d['threads'], kv['threads']))
check(d['exit'] == {'how': 'exit', 'status': 3, 'signal': None}, 'exit %r' % d['exit'])
check(d['thread_ns'] >= d['wall_ns'] > 0, 'thread_ns %d < wall_ns %d' % (d['thread_ns'], d['wall_ns']))
check(d['misses_available'] in (True, False), 'misses_available')
if not d['misses_available']:
    check(isinstance(d['misses_reason'], str) and d['misses_reason'], 'misses_reason empty')
by = {s['site']: s for s in d['sites']}
def site(key):
    s = by.get(key)
    check(s is not None, 'no site %s (have %s)' % (key, sorted(by)))
    return s or {'instances': [], 'count': 0, 'id': '', 'function': None, 'kind': '', 'first_lock_site': None}
def acq(s): return [i['acquisitions'] for i in s['instances']]
f = 'profile_prog.c'
hot = site('%s:%d' % (f, kv['l_hot']))
check(acq(hot) == [kv['hot_count']], 'hot acquisitions %r, expected %d' % (acq(hot), kv['hot_count']))
check(hot['function'] in ('basic', 'main'), 'hot function %r' % hot['function'])  # basic() may be inlined
check(hot['kind'] == 'init' and hot['count'] == 1, 'hot kind/count')
cs = hot.get('call_sites', [])
check(len(cs) == 1 and cs[0]['site'].startswith(f + ':') and cs[0]['function'] == 'hot_worker'
      and cs[0]['acquisitions'] == kv['hot_count'], 'hot call sites %r' % cs)
check(sum(c['hold_ns'] for c in cs) == sum(i['hold_ns'] for i in hot['instances']), 'hot: call-site holds sum to the instance hold')
for i in hot['instances']:
    check(0 <= i['contended'] <= i['acquisitions'] and i['hold_ns'] > 0, 'hot contended/hold')
    check(i['misses'] is None or not d['misses_available'] is False, 'misses null when unavailable')
# histograms are per site: every acquisition of the site counted once in each
check(sum(hot.get('wait_hist', [])) == kv['hot_count'] and sum(hot.get('hold_hist', [])) == kv['hot_count'], 'hot histograms')
check(len(hot.get('wait_hist', [])) == 40 and len(hot.get('hold_hist', [])) == 40, 'histogram length')
light = site('%s:%d' % (f, kv['l_hot'] + 1))
check(acq(light) == [100], 'light acquisitions %r' % acq(light))
many = site('%s:%d' % (f, kv['l_many']))
check(many['count'] == 5 and sorted(acq(many)) == [1, 2, 3, 4, 5], 'many: count %r acquisitions %r' % (many['count'], acq(many)))
check(sum(many.get('wait_hist', [])) == 15 and sum(many.get('hold_hist', [])) == 15, 'many: site histograms %r' % many.get('hold_hist'))
st = site('static_mx')
check(st['kind'] == 'static' and acq(st) == [7], 'static: kind %r acquisitions %r' % (st['kind'], acq(st)))
check(st['first_lock_site'] == '%s:%d' % (f, kv['l_static']), 'static first lock site %r' % st['first_lock_site'])
two = site('%s:%d' % (f, kv['l_two']))
cs = {c['site']: c['acquisitions'] for c in two.get('call_sites', [])}
check(sorted(cs.values()) == [3, 5] and all(k.startswith(f + ':') for k in cs), 'two call sites %r' % cs)
fns = sorted(c['function'] for c in two.get('call_sites', []))
check(fns == ['lock_twice_site_a', 'lock_twice_site_b'] or len(set(cs)) == 2, 'two call-site functions %r' % fns)
rec = [i for s in d['sites'] for i in s['instances'] if i['type'] == 'recursive']
check(len(rec) == 1 and rec[0]['acquisitions'] == 4 and rec[0]['recursive_relocks'] == 8,
      'recursive %r' % [(i['acquisitions'], i['recursive_relocks']) for i in rec])
tries = [i for s in d['sites'] for i in s['instances'] if i['trylocks']]
check(len(tries) == 1 and tries[0]['trylocks'] == 6 and tries[0]['trylock_failures'] == kv['try_fails'] == 6,
      'trylocks %r' % [(i['trylocks'], i['trylock_failures']) for i in tries])
conds = [i for s in d['sites'] for i in s['instances'] if i['cond_waits']]
check(sorted(i['cond_waits'] for i in conds) == sorted([kv['cond_calls'], kv['hold_waits']]) and all(i['cond_wait_ns'] > 0 for i in conds),
      'cond waits %r, program made %d and %d' % ([i['cond_waits'] for i in conds], kv['cond_calls'], kv['hold_waits']))
# a hold across a condition wait, while another thread takes the mutex from
# another call site: the waiter's call site keeps its whole hold (>= the 6 ms
# it spins; the wait excluded)
hs = [c for s in d['sites'] for c in s.get('call_sites', []) if c['site'] == '%s:%d' % (f, kv['l_hold_lock'])]
check(len(hs) == 1 and hs[0]['acquisitions'] == 1 and hs[0]['hold_ns'] >= 6000000,
      'hold across a condition wait %r' % hs)
early = [s for s in d['sites'] if s.get('call_sites') and s['call_sites'][0]['function'] == 'early_worker']
check(len(early) == 1 and acq(early[0]) == [10], 'early-exiting thread %r' % [acq(s) for s in early])
c11 = site('%s:%d' % (f, kv['l_c11']))
cs = c11.get('call_sites', [])
check([i['type'] for i in c11['instances']] == ['c11'], 'C11 type')
check(acq(c11) == [3] and len(cs) == 1 and cs[0]['site'] == '%s:%d' % (f, kv['l_c11_lock']), 'C11 %r %r' % (acq(c11), cs))
for s in d['sites']:
    check(len(s['id']) == 16 and int(s['id'], 16) >= 0, 'id %r' % s['id'])
    check(0 < len(s['frames']) <= 8, 'frames %r' % s['frames'])
ids2 = sorted(s['id'] for s in json.load(open(path2))['sites'])
check(ids2 == sorted(s['id'] for s in d['sites']), 'site ids differ between two runs')
for b in bad: print('FAIL: %s: %s' % (path.rsplit('/', 1)[-1], b))
print(hot['id'])
sys.exit(1 if bad else 0)
PY
python3 "$tmp/check.py" "$tmp/prof.out" "$tmp/b.json" "$tmp/b2.json" glibc > "$tmp/b.check" || { grep FAIL "$tmp/b.check"; fails=$((fails+1)); }
hot_id=$(tail -1 "$tmp/b.check")
python3 "$tmp/check.py" "$tmp/mcs.out" "$tmp/m.json" "$tmp/b2.json" mcs > "$tmp/m.check" || { grep FAIL "$tmp/m.check"; fails=$((fails+1)); }

# ---- LIBLOCK_PROFILE_ONLY -------------------------------------------------------------
timeout 60 env LD_PRELOAD="$lib" LIBLOCK_PROFILE_OUT="$tmp/o.json" LIBLOCK_PROFILE_ONLY="$hot_id" "$prog" basic > /dev/null
python3 - "$tmp/o.json" "$hot_id" <<'PY' || fails=$((fails+1))
import json, sys
d = json.load(open(sys.argv[1]))
ids = [s['id'] for s in d['sites']]
ok = ids == [sys.argv[2]] and d['sites'][0]['instances'][0]['acquisitions'] == 80000
print('' if ok else 'FAIL: LIBLOCK_PROFILE_ONLY: sites %r' % ids, end='')
sys.exit(0 if ok else 1)
PY

# ---- fork, crash, _exit, SIGUSR1, no output path ---------------------------------------
prof "$tmp/f.json" "$prog" fork > "$tmp/f.out"; rc=$?
child=$(sed -n 's/^child=//p' "$tmp/f.out")
[ $rc -eq 0 ] && grep -q '^child_status=0$' "$tmp/f.out" || fail "fork: parent rc $rc, $(cat "$tmp/f.out")"
python3 - "$tmp/f.json" "$tmp/f.json.$child" <<'PY' || fails=$((fails+1))
import json, sys
p, c = (json.load(open(x)) for x in sys.argv[1:3])
pa = [i['acquisitions'] for s in p['sites'] for i in s['instances']]
ca = [i['acquisitions'] for s in c['sites'] for i in s['instances']]
ok = pa == [8] and ca == [5] and c['pid'] != p['pid'] and c['exit']['status'] == 0
if not ok: print('FAIL: fork: parent %r child %r' % (pa, ca))
sys.exit(0 if ok else 1)
PY
prof "$tmp/c.json" "$prog" crash > /dev/null 2>&1; rc=$?
[ $rc -eq 134 ] || fail "crash: exit status $rc, expected 134 (SIGABRT)"
prof "$tmp/u.json" "$prog" uexit > /dev/null; rc=$?
[ $rc -eq 5 ] || fail "_exit: status $rc, expected 5"
prof "$tmp/s.json" "$prog" usr1 > /dev/null; rc=$?
[ $rc -eq 0 ] || fail "usr1: status $rc"
python3 - "$tmp" <<'PY' || fails=$((fails+1))
import json, sys
t = sys.argv[1]
bad = []
def one(name, how, status, sig, n):
    try:
        d = json.load(open('%s/%s' % (t, name)))
    except Exception as e:
        bad.append('%s: %s' % (name, e)); return
    a = [i['acquisitions'] for s in d['sites'] for i in s['instances']]
    if d['exit'] != {'how': how, 'status': status, 'signal': sig} or a != [n]:
        bad.append('%s: exit %r acquisitions %r' % (name, d['exit'], a))
one('c.json', 'signal', None, 6, 4)
one('u.json', '_exit', 5, None, 4)
one('s.json.usr1.1', 'usr1', None, None, 4)
one('s.json', 'exit', 0, None, 5)
for b in bad: print('FAIL: %s' % b)
sys.exit(1 if bad else 0)
PY
timeout 60 env LD_PRELOAD="$lib" "$prog" basic > "$tmp/none.out" 2> "$tmp/none.err"
[ "$(wc -l < "$tmp/none.err")" -eq 1 ] && grep -q LIBLOCK_PROFILE_OUT "$tmp/none.err" || fail "no LIBLOCK_PROFILE_OUT: stderr $(cat "$tmp/none.err")"
same "$tmp/plain.out" "$tmp/none.out" || fail "no LIBLOCK_PROFILE_OUT: output changed"
ls "$tmp"/*.tmp > /dev/null 2>&1 && fail "temporary report files left behind"
prof "$tmp/sh.json" sh -c "\"$prog\" uexit; echo pid=\$\$" > "$tmp/sh.out"
shpid=$(sed -n 's/^pid=//p' "$tmp/sh.out")
[ -f "$tmp/sh.json" ] && [ "$(ls "$tmp"/sh.json.* 2>/dev/null | wc -l)" -eq 1 ] || fail "sh -c: reports $(ls "$tmp"/sh.json*)"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d['pid'] != int(sys.argv[2]))" "$tmp/sh.json" "$shpid" ||
  fail "sh -c: PATH is not the first process's report"

ti="$build/tests/test_interpose"
topics=$([ -x "$ti" ] && "$ti" --topics)
[ -n "$topics" ] || fail "$ti missing (make), or it lists no topics"
for t in $topics; do
  if [ -x "$build/tests/$t" ]; then
    timeout 120 env LD_PRELOAD="$lib" LIBLOCK_PROFILE_OUT="$tmp/$t.json" LIBLOCK_LOCK=mcs LIBLOCK_WAIT=spin-then-park \
      LIBLOCK_STRICT=1 LIBLOCK_INTERPOSE_TEST_CHILD=1 "$build/tests/$t" > "$tmp/$t.out" 2>&1 ||
      fail "$t under the profiler (mcs): $(grep FAIL "$tmp/$t.out" | head -3)"
  else
    fail "$build/tests/$t missing (make)"
  fi
done

finish
