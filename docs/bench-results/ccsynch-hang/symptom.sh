#!/bin/bash
# The exact 2026-11-25 symptom: a SCHED_FIFO priority-2 busy loop (the RCL
# servicing priority; a busy RCL server that never yields looks like this)
# on CPU 1 for 30 s; 1 s in, the oversubscription runner's command for
# cc-synch at 32 threads under the runner's outer bound (0.5 + 5 + 20 = 25.5 s).
LB=$1; algo=$2
chrt -f 2 taskset -c 1 bash -c 'e=$((SECONDS+30)); while ((SECONDS<e)); do :; done' &
hog=$!
sleep 1
t0=$(date +%s.%N)
timeout -s KILL 25.5 $LB -a $algo -t 32 -d 100 -k 2 -T 5 -p rr --handoffs --wake-probe -l rep1 -f json -D 0.5 > /tmp/ccsh/sym.out 2>&1
rc=$?
t1=$(date +%s.%N)
printf '%s victim=%s lb=%s rc=%d (137 = killed by the outer bound) wall=%.1fs output: %s\n' "$(date -u +%T)" "$algo" "$LB" $rc "$(echo "$t1 - $t0" | bc)" "$(grep -o '"status": "[a-z]*"\|"stage": "[a-z-]*"\|"elapsed_s": [0-9.]*' /tmp/ccsh/sym.out | tr '\n' ' ' | head -c 200)"
wait $hog
