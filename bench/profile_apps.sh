#!/usr/bin/env bash
# profile_apps.sh [BUILD] [OUT] - `liblock profile` on memcached and
# kccachetest, its advice applied with `liblock run --config`, and the effect.
#
#  memcached ($MEMCACHED, default Debian's binary; a build with debug
#    information gives file:line sites): the thesis's Get and Set setups
#    (Lozi's RCL thesis, UPMC 2014, section 5.3.4) scaled to 2 CPUs: as in the thesis, the server
#    on half the machine and the load generator on the other half, here
#    `memcached -t 2` pinned to CPU 0 and memcslap (2 client threads) to
#    CPU 1, on loopback; Get loads 30,000 keys then reads them (memcslap
#    -t get -e 30000), Set writes 10,000 (-t set -e 10000). memcached runs
#    under `liblock profile --advise` while memcslap drives it, then gets
#    SIGTERM (passed on by `liblock profile`) and the report is written.
#  kccachetest (kyotocabinet-utils): `kccachetest order -th T -rnd N`.
#  Effect: each program natively and under `liblock run --config ADVICE`,
#    interleaved, ROUNDS rounds, the ping-pong probe before and after each
#    round; ops/s (memcached: requests / memcslap's time; kccachetest:
#    records / the sum of the phase times it prints, so that the start-up of
#    the `liblock` front end is not counted). When an advice file names no lock, the "advised"
#    run is the same as the native one and says so.
# Also the cost of the profiler: the same runs under `liblock profile`.
# Outputs in OUT (default build/results/profile, not tracked): NAME.txt (the report),
# NAME.json, NAME.conf (the advice), effect.txt.
# Environment: ROUNDS (3), KC_THREADS (4), KC_RECORDS (200000), MEMCACHED.
set -u
build=${1:-build}
out=${2:-$build/results/profile}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
export LIBLOCK_BUILD="$root/$build"
liblock="$root/tools/liblock"
probe="$build/bin/interpose_probe"
ROUNDS=${ROUNDS:-3}; KC_THREADS=${KC_THREADS:-4}; KC_RECORDS=${KC_RECORDS:-200000}
MEMCACHED=${MEMCACHED:-memcached}
mkdir -p "$out"
port=$((30000 + $$ % 20000))
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

wait_port() { for _ in $(seq 200); do memcstat --servers=127.0.0.1:$1 >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }
# memcslap_ops TEST N: requests per second of one memcslap run against $port
memcslap_ops() {
  local s
  s=$(timeout 300 taskset -c 1 memcslap -s 127.0.0.1:$port -t "$1" -c 2 -e "$2" 2>&1 |
      awk -v t="$1" '$1 == "Time" && $3 == t && $5 == "keys" && $6 == "by" {print $(NF-1)}')
  [ -n "$s" ] && awk -v s="$s" -v n=$((2 * $2)) 'BEGIN {printf "%.0f\n", n / s}'
}

# --- profiles ---
for setup in "get 30000" "set 10000"; do
  read -r test n <<<"$setup"
  port=$((port + 1))
  "$liblock" profile --json "$out/memcached-$test.json" --advise "$out/memcached-$test.conf" \
      --plot "$out/memcached-$test.png" -- taskset -c 0 "$MEMCACHED" -t 2 -p $port -U 0 -l 127.0.0.1 -u root -m 64 \
      2>"$out/memcached-$test.txt" >/dev/null &
  pid=$!
  wait_port $port || { echo "memcached did not start" >&2; exit 1; }
  ops=$(memcslap_ops "$test" "$n")
  kill -TERM $pid; wait $pid
  echo "# the load: memcslap -t $test -c 2 -e $n (pinned to CPU 1): $ops ops/s while profiled" >>"$out/memcached-$test.txt"
done
"$liblock" profile --json "$out/kccachetest.json" --advise "$out/kccachetest.conf" --plot "$out/kccachetest.png" \
    -- kccachetest order -th "$KC_THREADS" -rnd $((KC_RECORDS / KC_THREADS)) >/dev/null 2>"$out/kccachetest.txt"

# --- effect of the advice ---
runs() { # NAME CONF: one measurement, native then advised
  local name=$1 conf=$2 mode pre
  for mode in native advised profiled; do
    pre=()
    [ $mode = advised ] && pre=("$liblock" run --config "$conf" --)
    [ $mode = profiled ] && pre=("$liblock" profile --)
    case $name in
      memcached-*)
        local test=${name#memcached-} n=30000; [ "$test" = set ] && n=10000
        port=$((port + 1))
        "${pre[@]}" taskset -c 0 "$MEMCACHED" -t 2 -p $port -U 0 -l 127.0.0.1 -u root -m 64 >/dev/null 2>"$tmp/last.err" &
        local pid=$!
        wait_port $port && memcslap_ops "$test" "$n" >>"$tmp/$name.$mode"
        kill -TERM $pid; wait $pid 2>/dev/null ;;
      kccachetest)
        local per=$((KC_RECORDS / KC_THREADS))
        "${pre[@]}" timeout 300 kccachetest order -th "$KC_THREADS" -rnd $per >"$tmp/kc.out" 2>/dev/null &&
          awk -v n=$KC_RECORDS '$1 == "time:" {t += $2} END {if (t > 0) printf "%.0f\n", n / t}' "$tmp/kc.out" >>"$tmp/$name.$mode" ;;
    esac
  done
}
med() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit} m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.0f [%.0f-%.0f]", m, v[1], v[NR]}'; }
{
  echo "# effect of the advice and cost of the profiler: ops/s, median [min-max] of $ROUNDS interleaved rounds"
  echo "# (native; under liblock run --config ADVICE; under liblock profile); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
  for r in $(seq "$ROUNDS"); do
    p0=$("$probe")
    for name in memcached-get memcached-set kccachetest; do runs $name "$out/$name.conf"; done
    echo "# round $r probe before $p0 ns, after $("$probe") ns"
  done
  for name in memcached-get memcached-set kccachetest; do
    sites=$(grep -c '^site ' "$out/$name.conf")
    printf '%-15s %2d advised site(s)  native %-24s advised %-24s profiled %-24s\n' "$name" "$sites" \
      "$(med <"$tmp/$name.native" 2>/dev/null)" "$(med <"$tmp/$name.advised" 2>/dev/null)" \
      "$(med <"$tmp/$name.profiled" 2>/dev/null)"
  done
} | tee "$out/effect.txt"
