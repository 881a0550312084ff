#!/bin/bash
# usage: peer2.sh KIND ALGO N [VICTIM_BINARY]
#  KIND fifo2:  a SCHED_FIFO priority-2 busy loop (the RCL servicing threads'
#               priority, sched_get_priority_min+1) on CPU 1 for 6 s: what a
#               busy RCL server that never yields looks like to the CPU
#               (self-bounded loop, no helper process needed to stop it)
#  KIND rcl0/rcl200: a real busy RCL server: lockbench -a rcl -t 2 -d 0 -D 6
#               (server on CPU 1, one client) with LIBLOCK_RCL_SHARE_US=0/200
# The victim (the oversubscription arguments, 32 threads) starts 1 s later.
kind=$1; algo=$2; n=$3; LB=${4:-/tmp/ccsh/lockbench-main}
PEER=/tmp/ccsh/lockbench-main
for i in $(seq 1 $n); do
  case $kind in
    fifo2) chrt -f 2 taskset -c 1 bash -c 'e=$((SECONDS+6)); while ((SECONDS<e)); do :; done' & ;;
    rcl0) LIBLOCK_RCL_SHARE_US=0 nice -n -10 $PEER -a rcl -t 2 -d 0 -D 6 -T 5 --no-probe -f json > /tmp/ccsh/peer.out 2>&1 & ;;
    rcl200) LIBLOCK_RCL_SHARE_US=200 nice -n -10 $PEER -a rcl -t 2 -d 0 -D 6 -T 5 --no-probe -f json > /tmp/ccsh/peer.out 2>&1 & ;;
  esac
  peer=$!
  sleep 1
  t0=$(date +%s.%N)
  { timeout 60 $LB -a $algo -t 32 -d 100 -k 2 -T 5 --handoffs --wake-probe -D 0.5 -f json > /tmp/ccsh/victim.out 2>/tmp/ccsh/victim.err; echo "$? $(date +%s.%N)" > /tmp/ccsh/victim.end; } &
  v=$!
  sleep 2.5
  vp=$(pgrep -f "^$LB -a $algo" | head -1)
  snap="finished"
  if [ -n "$vp" ]; then
    snap="main=$(cat /proc/$vp/wchan); threads=$(ls /proc/$vp/task | wc -l); fifo=$(for t in /proc/$vp/task/*; do chrt -p $(basename $t) 2>/dev/null | grep -q FIFO && echo -n "$(basename $t):$(cut -d' ' -f3 $t/stat) "; done)"
  fi
  wait $v; wait $peer
  read rc t1 < /tmp/ccsh/victim.end
  st=$(grep -o '"status": "[a-z]*"\|"stage": "[a-z-]*"\|"elapsed_s": [0-9.]*' /tmp/ccsh/victim.out | tr '\n' ' ')
  printf '%s peer=%s victim=%s lb=%s run=%d rc=%d wall=%.2fs %s\n  at 2.5 s: %s\n' "$(date -u +%T)" "$kind" "$algo" "$(basename $LB)" "$i" "$rc" "$(echo "$t1 - $t0" | bc)" "$st" "$snap"
done
