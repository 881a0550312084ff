#!/usr/bin/env bash
# interpose_apps.sh [BUILD] - real programs under the interposer, per algorithm.
#
#  memcached: `memcached -t 4` on loopback, driven by memcslap (4 client
#    threads, set then get, E requests per thread); ops/s = requests / the
#    time memcslap reports.  glibc (no interposer) is measured alongside.
#  kccachetest: `kccachetest order -th T -rnd (RECORDS/T)` at T = 1 2 8 32 128;
#    records/s = T * (RECORDS/T) / wall time of the whole test (set, get,
#    remove phases).
# Algorithms run interleaved within each round (glibc, a, b, ..., glibc, a,
# b, ...); the median over ROUNDS rounds is printed with min-max, and the
# ping-pong probe (bench/probe.h) before and after each round.  Waiting
# policy per algorithm: spin-then-park, else park, else yield (as in the
# tests; pure spinning FIFO locks collapse with more threads than CPUs).
# Environment: ROUNDS (3), E (10000), RECORDS (64000), ALGOS (all), THREADS.
# The application benchmark (default policies, time / glibc, a
# bound per run, the programs' output checked) is `liblock bench apps`
# (tools/liblock_cli/_apps.py, programs in bench/apps/, docs/bench.md).
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
lib="$PWD/$build/lib/liblock-interpose.so"
probe="$build/bin/interpose_probe"
ROUNDS=${ROUNDS:-3}; E=${E:-10000}; RECORDS=${RECORDS:-64000}; THREADS=${THREADS:-1 2 8 32 128}
mapfile -t algos < <("$build/bin/liblock-info" | python3 -c '
import json, os, sys
want = os.environ.get("ALGOS", "").split()
for line in sys.stdin:
    a = json.loads(line)
    if want and a["name"] not in want: continue
    pol = next((p for p in ("spin-then-park", "park", "yield") if p in a["policies"]), "")
    print(a["name"], pol)')
algos=("glibc -" "${algos[@]}")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
port=$((30000 + $$ % 20000))

runenv() { # algo policy -> env prefix
  if [ "$1" = glibc ]; then echo env; else echo env LD_PRELOAD=$lib LIBLOCK_LOCK=$1 ${2:+LIBLOCK_WAIT=$2} LIBLOCK_STRICT=1; fi
}
med() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit} m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.0f [%.0f-%.0f]", m, v[1], v[NR]}'; }

echo "# memcached -t 4, memcslap -c 4 -e $E (set, get); ops/s median [min-max] of $ROUNDS rounds; $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  p0=$("$probe")
  for entry in "${algos[@]}"; do
    read -r algo pol <<<"$entry"; [ "$pol" = - ] && pol=
    $(runenv "$algo" "$pol") memcached -t 4 -p $port -U 0 -l 127.0.0.1 -u root -m 64 >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do memcstat --servers=127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.05; done
    for t in set get; do
      s=$(timeout 120 memcslap -s 127.0.0.1:$port -t $t -c 4 -e "$E" 2>&1 | awk -v t=$t '$1 == "Time" && $3 == t && $5 == "keys" && $6 == "by" {print $(NF-1)}')
      [ -n "$s" ] && awk -v s="$s" -v n=$((4 * E)) 'BEGIN {printf "%.0f\n", n / s}' >>"$tmp/mc.$algo.$t"
    done
    kill -TERM $pid; wait $pid 2>/dev/null; port=$((port+1))
  done
  echo "# round $r probe before ${p0} ns, after $("$probe") ns"
done
printf '%-16s %-15s %-26s %-26s\n' algorithm policy "set ops/s" "get ops/s"
for entry in "${algos[@]}"; do
  read -r algo pol <<<"$entry"
  printf '%-16s %-15s %-26s %-26s\n' "$algo" "${pol:-}" "$(med <"$tmp/mc.$algo.set" 2>/dev/null)" "$(med <"$tmp/mc.$algo.get" 2>/dev/null)"
done

echo
echo "# kccachetest order -rnd, $RECORDS records in total; records/s median [min-max] of $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  p0=$("$probe")
  for th in $THREADS; do
    n=$((RECORDS / th))
    for entry in "${algos[@]}"; do
      read -r algo pol <<<"$entry"; [ "$pol" = - ] && pol=
      s0=$(date +%s%N)
      if $(runenv "$algo" "$pol") timeout 120 kccachetest order -th "$th" -rnd "$n" >"$tmp/kc.out" 2>&1 &&
         [ "$(grep -v '^$' "$tmp/kc.out" | tail -n 1)" = ok ]; then
        awk -v ns=$(( $(date +%s%N) - s0 )) -v n=$((n * th)) 'BEGIN {printf "%.0f\n", n / (ns / 1e9)}' >>"$tmp/kc.$algo.$th"
      else
        echo "# kccachetest -th $th under $algo failed or timed out" >&2
      fi
    done
  done
  echo "# round $r probe before ${p0} ns, after $("$probe") ns"
done
printf '%-16s' algorithm; for th in $THREADS; do printf ' %-22s' "$th threads"; done; echo
for entry in "${algos[@]}"; do
  read -r algo pol <<<"$entry"
  printf '%-16s' "$algo"
  for th in $THREADS; do printf ' %-22s' "$(med <"$tmp/kc.$algo.$th" 2>/dev/null)"; done; echo
done
