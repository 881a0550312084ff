#!/bin/bash
# usage: peer.sh SHARE_US ALGO N: for each of N runs, a peer process keeps an RCL
# server busy on CPU 1 for 6 s (lockbench -a rcl, 1 client, no delay; its
# servicing thread is SCHED_FIFO at the RCL priority), and 1 s later the
# victim lockbench (the oversubscription arguments, 32 threads) starts.
LB=${VICTIM:-/tmp/ccsh/lockbench-main}; PEER=/tmp/ccsh/lockbench-main
share=$1; algo=$2; n=$3
for i in $(seq 1 $n); do
  LIBLOCK_RCL_SHARE_US=$share $PEER -a rcl -t 2 -d 0 -D 6 -T 5 --no-probe -f json > /tmp/ccsh/peer.out 2>&1 &
  peer=$!
  sleep 1
  t0=$(date +%s.%N)
  timeout 60 $LB -a $algo -t 32 -d 100 -k 2 -T 5 --handoffs --wake-probe -D 0.5 -f json > /tmp/ccsh/victim.out 2>&1 &
  v=$!
  sleep 3
  # where is the victim after 3 s (a normal run is over in ~1 s)
  snap=""
  if kill -0 $v 2>/dev/null; then
    vp=$(pgrep -P $v lockbench || echo $v)
    snap=$(for t in /proc/$vp/task/*; do echo -n "$(basename $t):$(cut -d' ' -f3 $t/stat)/$(cat $t/wchan)/$(chrt -p $(basename $t) | head -1 | awk '{print $NF}') "; done)
  fi
  wait $v; rc=$?
  t1=$(date +%s.%N)
  wait $peer
  st=$(grep -o '"status": "[a-z]*"' /tmp/ccsh/victim.out | head -1)
  printf '%s share_us=%s victim=%s lb=%s run=%d rc=%d wall=%.2fs %s peer=%s\n  at 3 s: %s\n' "$(date -u +%T)" "$share" "$algo" "$(basename $(dirname $(dirname $LB)))/$(basename $LB)" "$i" "$rc" "$(echo "$t1 - $t0" | bc)" "$st" "$(grep -o '"status": "[a-z]*"' /tmp/ccsh/peer.out | head -1)" "${snap:-finished}"
done
