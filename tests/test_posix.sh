#!/usr/bin/env bash
# test_posix.sh BUILD - the POSIX conformance programs of tests/posix/ (one
# small pthread/C11/semaphore program per requirement; each prints a
# transcript of return codes and values) run natively and under the
# interposer, whose transcripts must be identical:
#  - natively twice: both runs exit 0 and agree (the transcript is
#    deterministic; it is the reference);
#  - under build/lib/liblock-interpose.so (LIBLOCK_STRICT=1) with every
#    algorithm of build/bin/liblock-info; the condition-variable programs
#    (cond_*, c11_cnd*) also with each other condition-variable kind
#    (LIBLOCK_COND=mostly-lifo, LIBLOCK_COND=glibc, LIBLOCK_COND_GENERIC=1;
#    the default is fifo); the semaphore programs (sem_*) also with
#    LIBLOCK_SEM=fifo and mostly-lifo (alone, and mostly-lifo with mcs);
#    the mutex programs (mutex_*, c11_mtx*) also with LIBLOCK_LAZY=0 (every
#    mutex on its algorithm from its first use, not its first contention).
#  Configuration names: ALGO, ALGO/cond=KIND, sem=KIND, ALGO/sem=KIND, ALGO/eager.
#  Each run has a 30 s bound (each program also has a 20 s watchdog of its
#  own): a hang is a mismatch, not a hung suite.  Runs go LIBLOCK_POSIX_JOBS
#  (default 4; most of them sleep) at a time.
#  tests/posix/EXPECTED_FAILURES lists known divergences ("PROGRAM
#  CONFIG-GLOB reason"; globs as in the shell): a matching mismatch is an
#  expected failure (reported, never counted as a pass; a run that crashed
#  or hung never is); a matching run
#  that passes is reported as XPASS, and an entry all of whose runs pass
#  fails the test (it is obsolete: remove it), so that the list is emptied
#  as the divergences are fixed.  (Per entry, not per run: some divergences
#  depend on timing and show in most runs only.)  Either field may list
#  several globs separated by '|'; a glob written !GLOB excludes.
#  LIBLOCK_POSIX_ONLY=GLOB restricts the programs, LIBLOCK_POSIX_CONFIGS=GLOB
#  the configurations (for quick checks; '|' separates globs here too);
#  LIBLOCK_POSIX_INTERPOSER=SO runs another build's interposer, and
#  LIBLOCK_POSIX_EXPECTED=FILE (/dev/null: none) replaces the list.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
bin="$root/$build/tests/posix"
lib=${LIBLOCK_POSIX_INTERPOSER:-"$root/$build/lib/liblock-interpose.so"}
info="$root/$build/bin/liblock-info"
xfile=${LIBLOCK_POSIX_EXPECTED:-"$root/tests/posix/EXPECTED_FAILURES"}
jobs=${LIBLOCK_POSIX_JOBS:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f "$lib" ] && [ -x "$info" ] || { echo "FAIL: $lib or $info missing (make all)"; exit 1; }
globmatch() { # NAME FIELD: NAME matches one of FIELD's '|'-separated globs and no '!GLOB'
  local g hit=1; IFS='|' read -ra gs <<<"$2"
  for g in "${gs[@]}"; do
    if [[ $g == '!'* ]]; then [[ $1 == ${g#!} ]] && return 1
    else [[ $1 == $g ]] && hit=0; fi
  done
  return $hit
}
progs=()
for src in tests/posix/*.c; do
  p=$(basename "$src" .c)
  globmatch "$p" "${LIBLOCK_POSIX_ONLY:-*}" || continue
  [ -x "$bin/$p" ] || { echo "FAIL: $bin/$p missing (make all builds tests/posix/*.c)"; exit 1; }
  progs+=("$p")
done
[ ${#progs[@]} -gt 0 ] || { echo "FAIL: no programs"; exit 1; }
mapfile -t algos < <("$info" | python3 -c 'import json, sys; [print(json.loads(l)["name"]) for l in sys.stdin]')
[ ${#algos[@]} -gt 0 ] || { echo "FAIL: no algorithms from $info"; exit 1; }

# one run: PROG CONFIG (CONFIG "native" or "native2": no preload) -> $tmp/out/PROG@CONFIG
runone() {
  local p=$1 cfg=$2 envs=() part
  if [[ $cfg != native* ]]; then
    envs=(LD_PRELOAD="$lib" LIBLOCK_STRICT=1)
    IFS=/ read -ra parts <<<"$cfg"
    for part in "${parts[@]}"; do
      case $part in
        cond=generic) envs+=(LIBLOCK_COND_GENERIC=1) ;;
        eager) envs+=(LIBLOCK_LAZY=0) ;;
        cond=*) envs+=(LIBLOCK_COND="${part#cond=}") ;;
        sem=*) envs+=(LIBLOCK_SEM="${part#sem=}") ;;
        *) envs+=(LIBLOCK_LOCK="$part") ;;
      esac
    done
  fi
  local out="$tmp/out/$p@${cfg//\//+}"
  ( cd "$tmp/cwd" && env -u LIBLOCK_LOCK -u LIBLOCK_SEM -u LIBLOCK_COND -u LIBLOCK_COND_GENERIC -u LIBLOCK_CONFIG -u LIBLOCK_LAZY \
      "${envs[@]}" timeout -k 5 30 "$bin/$p" ) > "$out" 2>&1 < /dev/null
  local rc=$?
  case $rc in
    124|137) echo "=== killed after 30 s (hang)" >> "$out" ;;
    *) echo "=== exit status $rc" >> "$out" ;;
  esac
}
export -f runone
export tmp bin lib
mkdir -p "$tmp/out" "$tmp/cwd"

t0=$(date +%s)
# native reference, twice
for p in "${progs[@]}"; do printf '%s native\n%s native2\n' "$p" "$p"; done > "$tmp/native.jobs"
xargs -P "$jobs" -L 1 bash -c 'runone "$0" "$1"' < "$tmp/native.jobs"
# the interposed configurations; the programs that may wait out a 2 s
# window (cancellation, EINTR) first, so that they overlap the rest
ordered=()
for p in "${progs[@]}"; do [[ $p == *cancel* || $p == *eintr* ]] && ordered+=("$p"); done
for p in "${progs[@]}"; do [[ $p == *cancel* || $p == *eintr* ]] || ordered+=("$p"); done
for p in "${ordered[@]}"; do
  cfgs=("${algos[@]}")
  # mutex programs also with every mutex engaged from its first use (the
  # default engages a mutex at its first contention: docs/interpose.md)
  [[ $p == mutex_* || $p == c11_mtx* ]] && for a in "${algos[@]}"; do cfgs+=("$a/eager"); done
  case $p in
    cond_*|c11_cnd*) for a in "${algos[@]}"; do cfgs+=("$a/cond=mostly-lifo" "$a/cond=glibc" "$a/cond=generic"); done ;;
    sem_*) cfgs+=("sem=fifo" "sem=mostly-lifo" "mcs/sem=mostly-lifo") ;;
  esac
  for c in "${cfgs[@]}"; do globmatch "$c" "${LIBLOCK_POSIX_CONFIGS:-*}" && printf '%s %s\n' "$p" "$c"; done
done > "$tmp/runs.jobs"
xargs -P "$jobs" -L 1 bash -c 'runone "$0" "$1"' < "$tmp/runs.jobs"
t1=$(date +%s)

python3 - "$tmp" "$xfile" "$(wc -l < "$tmp/runs.jobs")" "$((t1 - t0))" <<'PY'
import difflib, fnmatch, os, sys
from collections import OrderedDict
tmp, xfile, nruns, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
filtered = bool(os.environ.get('LIBLOCK_POSIX_ONLY') or os.environ.get('LIBLOCK_POSIX_CONFIGS'))
def read(p, c):
    with open(os.path.join(tmp, 'out', '%s@%s' % (p, c.replace('/', '+'))), errors='replace') as f:
        return f.read()
xf = []
if os.path.exists(xfile):
    for n, line in enumerate(open(xfile), 1):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        w = line.split(None, 2)
        if len(w) < 3:
            print('FAIL: %s:%d: expected "PROGRAM CONFIG-GLOB reason"' % (xfile, n)); sys.exit(1)
        xf.append((w[0], w[1], w[2], n))
def match(name, field):  # globs separated by '|'; '!GLOB' excludes
    gs = field.split('|')
    return (any(fnmatch.fnmatchcase(name, g) for g in gs if not g.startswith('!')) and
            not any(fnmatch.fnmatchcase(name, g[1:]) for g in gs if g.startswith('!')))
def expected(p, c):
    for e in xf:
        if match(p, e[0]) and match(c, e[1]):
            return e
    return None
bad = 0
ref = {}
for line in open(os.path.join(tmp, 'native.jobs')):
    p, c = line.split()
    if c != 'native':
        continue
    a, b = read(p, 'native'), read(p, 'native2')
    if not a.endswith('=== exit status 0\n'):
        print('FAIL: %s natively: %s' % (p, a.strip().splitlines()[-1])); bad += 1
    elif a != b:
        print('FAIL: %s natively: two runs differ (not deterministic):' % p)
        print(''.join(difflib.unified_diff(a.splitlines(1), b.splitlines(1), 'native', 'native2'))); bad += 1
    ref[p] = a
results = OrderedDict()   # program -> list of (config, status, transcript)
used = {}  # EXPECTED_FAILURES line -> statuses of the runs it matched
for line in open(os.path.join(tmp, 'runs.jobs')):
    p, c = line.split()
    out = read(p, c)
    e = expected(p, c)
    last = out.rstrip('\n').rsplit('\n', 1)[-1]
    if e and (last.startswith('=== killed') or (last.startswith('=== exit status ') and int(last.split()[-1]) >= 128)):
        e = None  # a crash or a hang is never an expected failure
    st = ('XPASS' if e else 'PASS') if out == ref.get(p) else ('XFAIL' if e else 'FAIL')
    if e:
        used.setdefault(e[3], []).append(st)
    results.setdefault(p, []).append((c, st, out, e))
counts = {'PASS': 0, 'FAIL': 0, 'XFAIL': 0, 'XPASS': 0}
print('%-32s %s' % ('program', 'configurations that differ from glibc (x: expected failure)'))
for p, rs in results.items():
    for c, st, out, e in rs:
        counts[st] += 1
    diff = [r for r in rs if r[1] in ('FAIL', 'XFAIL')]
    xp = [r for r in rs if r[1] == 'XPASS']
    if not diff and not xp:
        print('%-32s ok (%d)' % (p, len(rs)))
        continue
    print('%-32s %d of %d differ' % (p, len(diff), len(rs)))
    groups = OrderedDict()  # identical transcripts together
    for c, st, out, e in diff:
        groups.setdefault(out, []).append((c, st, e))
    for out, cs in groups.items():
        names = ' '.join(c + ('(x)' if st == 'XFAIL' else '') for c, st, e in cs)
        print('  %s:' % names)
        reasons = sorted(set(e[2] for c, st, e in cs if e))
        for r in reasons:
            print('    expected: %s' % r)
        d = list(difflib.unified_diff(ref[p].splitlines(1), out.splitlines(1), 'glibc', 'interposed', n=1))
        for l in d[2:40]:
            print('    ' + l.rstrip('\n'))
        if len(d) > 40:
            print('    ...')
    if xp:
        print('  XPASS (listed in EXPECTED_FAILURES, identical to glibc this time): %s' % ' '.join(c for c, st, out, e in xp))
obsolete = 0
for e in xf:
    sts = used.get(e[3], [])
    if sts and 'XFAIL' not in sts:
        print('FAIL: EXPECTED_FAILURES line %d (%s %s) is obsolete: all %d runs it matches are identical to glibc; remove it'
              % (e[3], e[0], e[1], len(sts)))
        obsolete += 1
    elif not sts and not filtered:
        print('note: EXPECTED_FAILURES line %d (%s %s) matched no run' % (e[3], e[0], e[1]))
print('%d programs, %d interposed runs in %s s: %d identical, %d expected failures, %d FAILED, %d XPASS' %
      (len(results), nruns, secs, counts['PASS'], counts['XFAIL'], counts['FAIL'], counts['XPASS']))
bad += counts['FAIL'] + obsolete + (nruns == 0)
print('test_posix: ' + ('ok' if bad == 0 else '%d problem(s)' % bad))
sys.exit(1 if bad else 0)
PY
