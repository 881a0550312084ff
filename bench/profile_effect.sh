#!/usr/bin/env bash
# profile_effect.sh OUT NAME -- PROGRAM ARGS... - the whole loop on one program:
# `liblock profile --advise`, then the program natively and under
# `liblock run --config ADVICE`, interleaved, ROUNDS rounds (default 5), the
# ping-pong probe before and after each round.  The time is the program's own
# wall time (GNU time inside `liblock run`, so the front end's start-up is not
# counted); the profiled run's is the runtime's wall_ns.  Writes
# OUT/NAME.txt (report), NAME.json, NAME.conf (advice), NAME-effect.txt.
set -u
out=$1 name=$2; shift 2
[ "${1:-}" = -- ] && shift
cd "$(dirname "$0")/.." || exit 2
build=${BUILD:-build}
export LIBLOCK_BUILD="$PWD/$build"
liblock="$PWD/tools/liblock"
probe="$build/bin/interpose_probe"
ROUNDS=${ROUNDS:-5}
mkdir -p "$out"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$liblock" profile --json "$out/$name.json" --advise "$out/$name.conf" --plot "$out/$name.png" -- "$@" \
    >/dev/null 2>"$out/$name.txt" || { echo "profiling $* failed: $(tail -1 "$out/$name.txt")" >&2; exit 1; }
secs() { /usr/bin/time -f %e -o "$tmp/t" "$@" >/dev/null 2>&1 && cat "$tmp/t"; }
{
  echo "# $*: seconds, native / under liblock run --config $name.conf / under liblock profile; $ROUNDS interleaved rounds"
  echo "# $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); advised sites: $(grep -c '^site ' "$out/$name.conf")"
  for r in $(seq "$ROUNDS"); do
    p0=$("$probe")
    n=$(secs "$@")
    a=$("$liblock" run --config "$out/$name.conf" -- /usr/bin/time -f %e -o "$tmp/t" "$@" >/dev/null 2>&1 && cat "$tmp/t")
    "$liblock" profile --json "$tmp/p.json" -- "$@" >/dev/null 2>&1
    p=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["wall_ns"] / 1e9, 2))' "$tmp/p.json" 2>/dev/null)
    echo "round $r: native ${n:--} advised ${a:--} profiled ${p:--}   probe $p0 / $("$probe") ns"
  done
} | tee "$out/$name-effect.txt"
