#!/bin/bash
# usage: batch.sh ALGO N [extra lockbench args...]   (env: PREFIX e.g. "taskset -c 0")
# Runs N lockbench runs (0.5 s, -T 15); a run not finished after 8 s is a hang:
# gdb backtrace of all threads saved, then killed.
algo=$1; n=$2; shift 2
LB=/work/wt-ccsynch-hang/build/bin/lockbench
OUT=/work/wt-ccsynch-hang/docs/bench-results/ccsynch-hang
ok=0; bad=0; hang=0
for i in $(seq 1 $n); do
  $PREFIX $LB -a $algo -t 32 -d 100 -k 2 -T 15 --handoffs --wake-probe -D 0.5 -f json "$@" > /tmp/ccsh/out.$$ 2>&1 &
  pid=$!
  t=0
  while kill -0 $pid 2>/dev/null && [ $t -lt 80 ]; do sleep 0.1; t=$((t+1)); done
  if kill -0 $pid 2>/dev/null; then
    hang=$((hang+1))
    # the real lockbench pid (PREFIX may be taskset, which execs)
    f=$OUT/hang-$algo-$(date -u +%H%M%S)-$i.txt
    { echo "cmd: $PREFIX $LB -a $algo -t 32 ... $*"; date -u; uptime; } > $f
    gdb -p $pid -batch -ex 'info threads' -ex 'thread apply all bt' >> $f 2>&1
    kill -9 $pid; wait $pid 2>/dev/null
    echo "HANG run $i -> $f"
  else
    wait $pid; rc=$?
    if [ $rc = 0 ]; then ok=$((ok+1)); else bad=$((bad+1)); echo "rc=$rc run $i: $(tail -c 300 /tmp/ccsh/out.$$)"; fi
  fi
done
echo "$(date -u +%FT%TZ) algo=$algo prefix='$PREFIX' args='$*' runs=$n ok=$ok fail=$bad hang=$hang load=$(cut -d' ' -f1-3 /proc/loadavg)"
