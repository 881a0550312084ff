#!/usr/bin/env bash
# profile_memcached.sh [BUILD] - memcached's throughput with and without the
# profiler runtime (build/lib/liblock-profile.so, glibc's mutexes), rounds
# interleaved: `memcached -t 4` on loopback driven by memcslap (4 clients,
# E operations each, set then get), as bench/interpose_apps.sh does.
# Prints ops/s median [min-max] of ROUNDS rounds for each, the ratio of the
# medians, the probe (bench/probe.h via interpose_probe) around each round,
# and checks that each profiled run wrote its report.  Run it under
# `flock /work/bench.lock` on a shared machine.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
lib="$root/$build/lib/liblock-profile.so"
probe="$root/$build/bin/interpose_probe"
ROUNDS=${ROUNDS:-3}; E=${E:-10000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$((23000 + RANDOM % 2000))
med() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit} m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.0f [%.0f-%.0f]", m, v[1], v[NR]}'; }
echo "# memcached -t 4, memcslap -c 4 -e $E; $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  p0=$("$probe")
  for mode in glibc profiled; do
    if [ $mode = profiled ]; then
      env LD_PRELOAD="$lib" LIBLOCK_PROFILE_OUT="$tmp/mc.$r.json" memcached -t 4 -p $port -U 0 -l 127.0.0.1 -u root -m 64 >/dev/null 2>&1 &
    else
      memcached -t 4 -p $port -U 0 -l 127.0.0.1 -u root -m 64 >/dev/null 2>&1 &
    fi
    pid=$!
    for _ in $(seq 100); do memcstat --servers=127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.05; done
    for t in set get; do
      s=$(timeout 120 memcslap -s 127.0.0.1:$port -t $t -c 4 -e "$E" 2>&1 | awk -v t=$t '$1 == "Time" && $3 == t && $5 == "keys" && $6 == "by" {print $(NF-1)}')
      [ -n "$s" ] && awk -v s="$s" -v n=$((4 * E)) 'BEGIN {printf "%.0f\n", n / s}' >>"$tmp/$mode.$t"
    done
    kill -TERM $pid; wait $pid 2>/dev/null; port=$((port+1))
  done
  [ -s "$tmp/mc.$r.json" ] || echo "# round $r: the profiled memcached wrote no report"
  echo "# round $r probe before ${p0} ns, after $("$probe") ns"
done
for t in set get; do
  g=$(med <"$tmp/glibc.$t"); p=$(med <"$tmp/profiled.$t")
  printf '%-4s glibc %-24s profiled %-24s ratio %s\n' $t "$g" "$p" \
    "$(awk -v a="${g%% *}" -v b="${p%% *}" 'BEGIN {if (a > 0) printf "%.2f", b / a; else print "-"}')"
done
