#!/usr/bin/env bash
# test_profile_out.sh BUILD - the profiler's report files cannot be
# redirected by a symbolic link planted in the output directory (which may
# be shared, say /tmp): links are planted at the fixed temporary names an
# earlier version used (PATH.tmp, PATH.usr1.1.tmp) and at the final names
# (PATH, PATH.usr1.1), each pointing at a file of its own; after a profiled
# run of tests/profile_prog.c `usr1` (a SIGUSR1 snapshot, then the final
# report) every target still holds its old contents, the temporary-name
# links are untouched, PATH and PATH.usr1.1 are regular files holding the
# right reports, and no temporary file is left behind.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
lib="$root/$build/lib/liblock-profile.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails+1)); }
[ -f "$lib" ] || { echo "FAIL: $lib missing (make)"; exit 1; }
cc -g -O1 -pthread tests/profile_prog.c -o "$tmp/prog" || { echo "FAIL: cannot build profile_prog"; exit 1; }
mkdir "$tmp/shared" "$tmp/victims"
out="$tmp/shared/r.json"
for v in tmp final usr1 usr1tmp; do echo "precious $v" > "$tmp/victims/$v"; done
ln -s "$tmp/victims/tmp" "$out.tmp"
ln -s "$tmp/victims/final" "$out"
ln -s "$tmp/victims/usr1" "$out.usr1.1"
ln -s "$tmp/victims/usr1tmp" "$out.usr1.1.tmp"
timeout 60 env LD_PRELOAD="$lib" LIBLOCK_PROFILE_OUT="$out" "$tmp/prog" usr1 > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] || fail "profiled run: status $rc ($(head -2 "$tmp/err"))"
for v in tmp final usr1 usr1tmp; do
  [ "$(cat "$tmp/victims/$v")" = "precious $v" ] || fail "the file a planted link pointed at ($v) was written: $(head -c 80 "$tmp/victims/$v")"
done
[ -L "$out.tmp" ] && [ "$(readlink "$out.tmp")" = "$tmp/victims/tmp" ] || fail "the link at PATH.tmp was replaced or removed"
[ -L "$out.usr1.1.tmp" ] || fail "the link at PATH.usr1.1.tmp was replaced or removed"
for f in "$out" "$out.usr1.1"; do
  [ -f "$f" ] && [ ! -L "$f" ] || fail "$(basename "$f") is not a regular file: $(ls -l "$f")"
done
python3 - "$out" "$out.usr1.1" <<'PY' || fails=$((fails+1))
import json, sys
bad = []
for path, how in ((sys.argv[1], 'exit'), (sys.argv[2], 'usr1')):
    try:
        d = json.load(open(path))
        if d['exit']['how'] != how:
            bad.append('%s: exit %r' % (path, d['exit']))
    except Exception as e:
        bad.append('%s: %s' % (path, e))
for b in bad: print('FAIL: report %s' % b)
sys.exit(1 if bad else 0)
PY
left=$(find "$tmp/shared" -name '*.tmp' -type f)
[ -z "$left" ] || fail "temporary files left behind: $left"
[ $fails -eq 0 ] && echo "test_profile_out: ok" || echo "test_profile_out: $fails failed"
exit $((fails > 0))
