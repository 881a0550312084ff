#!/usr/bin/env bash
# profile_memcached.sh [BUILD] - memcached's throughput with and without the
# profiler runtime (build/lib/liblock-profile.so, glibc's mutexes), rounds
# interleaved, the order of the two alternating from round to round:
# `memcached -t 4` on loopback driven by memcslap (4 clients, E operations
# each, set then get), as bench/interpose_apps.sh does.
# Prints, for set and get, the median [min-max] over ROUNDS rounds of
#  - ops/s of each, and the median of the per-round ratios profiled/glibc;
#  - memcached's CPU time per operation (all its threads, from
#    /proc/PID/task/*/schedstat), and the median per-round ratio: the cost the
#    profiler adds, less sensitive than throughput to what else runs;
# the probe (bench/probe.h via interpose_probe) around each round, and checks
# that each profiled run wrote its report.  Extra environment for the
# profiled runs: PROFILE_ENV (e.g. PROFILE_ENV=LIBLOCK_PROFILE_ONLY=0000000000000001
# loads the profiler but records no lock).  PIN=1 runs memcached on CPU 0 and
# memcslap on CPU 1 (taskset): the server's own CPU then bounds its
# throughput, so the profiler's cost shows in it instead of in where the
# scheduler happens to place 4 workers and 4 clients on 2 CPUs (which alone
# moves glibc's Set rate a lot between rounds).  On a shared machine, run it
# under flock(1) on a lock file that every benchmark run there takes.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
lib="$root/$build/lib/liblock-profile.so"
probe="$root/$build/bin/interpose_probe"
ROUNDS=${ROUNDS:-3}; E=${E:-10000}
srv=(); cli=()
if [ "${PIN:-0}" = 1 ]; then srv=(taskset -c 0); cli=(taskset -c 1); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$((23000 + RANDOM % 2000))
med() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit} m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.4g [%.4g-%.4g]", m, v[1], v[NR]}'; }
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }
run_mode() { # mode round
  local mode=$1 r=$2 pid
  if [ "$mode" = profiled ]; then
    env LD_PRELOAD="$lib" ${PROFILE_ENV:-} LIBLOCK_PROFILE_OUT="$tmp/mc.$r.json" "${srv[@]}" memcached -t 4 -p $port -U 0 -l 127.0.0.1 -u root -m 64 >/dev/null 2>&1 &
  else
    "${srv[@]}" memcached -t 4 -p $port -U 0 -l 127.0.0.1 -u root -m 64 >/dev/null 2>&1 &
  fi
  pid=$!
  for _ in $(seq 100); do memcstat --servers=127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.05; done
  for t in set get; do
    local c0 c1 s
    c0=$(cpu_ns $pid)
    s=$(timeout 120 "${cli[@]}" memcslap -s 127.0.0.1:$port -t $t -c 4 -e "$E" 2>&1 | awk -v t=$t '$1 == "Time" && $3 == t && $5 == "keys" && $6 == "by" {print $(NF-1)}')
    c1=$(cpu_ns $pid)
    if [ -n "$s" ]; then
      awk -v s="$s" -v n=$((4 * E)) 'BEGIN {printf "%.0f\n", n / s}' >"$tmp/$mode.$t.$r"
      awk -v a="$c0" -v b="$c1" -v n=$((4 * E)) 'BEGIN {printf "%.0f\n", (b - a) / n}' >"$tmp/$mode.$t.cpu.$r"
    fi
  done
  kill -TERM $pid; wait $pid 2>/dev/null; port=$((port+1))
}
echo "# memcached -t 4, memcslap -c 4 -e $E; $(nproc) CPUs;${srv:+ memcached on CPU 0, memcslap on CPU 1;} load: $(cut -d' ' -f1-3 /proc/loadavg)${PROFILE_ENV:+; profiled with $PROFILE_ENV}"
for r in $(seq "$ROUNDS"); do
  p0=$("$probe")
  if [ $((r % 2)) = 1 ]; then order="glibc profiled"; else order="profiled glibc"; fi
  for mode in $order; do run_mode $mode $r; done
  [ -s "$tmp/mc.$r.json" ] || echo "# round $r: the profiled memcached wrote no report"
  echo "# round $r ($order) probe before ${p0} ns, after $("$probe") ns"
done
for t in set get; do
  for k in "" ".cpu"; do
    for r in $(seq "$ROUNDS"); do
      a=$(cat "$tmp/glibc.$t$k.$r" 2>/dev/null); b=$(cat "$tmp/profiled.$t$k.$r" 2>/dev/null)
      [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN {if (a > 0) printf "%.4f\n", b / a}'
    done >"$tmp/ratio.$t$k"
    cat "$tmp"/glibc."$t$k".[0-9]* 2>/dev/null >"$tmp/all.g"; cat "$tmp"/profiled."$t$k".[0-9]* 2>/dev/null >"$tmp/all.p"
  if [ -z "$k" ]; then what="ops/s"; else what="CPU ns/op"; fi
    printf '%-4s %-10s glibc %-26s profiled %-26s ratio %s\n' $t "$what" "$(med <"$tmp/all.g")" "$(med <"$tmp/all.p")" "$(med <"$tmp/ratio.$t$k")"
  done
done
