#!/bin/bash
# usage: OLD=old-tree/build/bin/lockbench NEW=build/bin/lockbench ROUNDS=10 run-lockbench.sh THREADS
# one line per run: build round throughput p50 p90 status; the order of the two builds alternates by round
B=${OLD:?old lockbench}; N=${NEW:-build/bin/lockbench}
T=$1; shift
for i in $(seq 1 ${ROUNDS:-10}); do
  if [ $((i%2)) = 0 ]; then order="new base"; else order="base new"; fi
  for w in $order; do
    if [ $w = base ]; then bin=$B; else bin=$N; fi
    $bin -a hybcomb -t $T -d 100 -k 2 -D 1 --no-probe "$@" | python3 -c "import json,sys; d=json.loads(sys.stdin.readline()); print('$w', $i, d['throughput_cs_per_s'], d['lat_cycles_p50'], d['lat_cycles_p90'], d['status'])"
  done
done
