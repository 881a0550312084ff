#!/bin/bash
# usage: rthog.sh SECS CPU algo n [args]: a SCHED_FIFO busy loop pinned to CPU for SECS s
# (RT throttling leaves 5% to normal tasks there), the batch runs meanwhile.
secs=$1; cpu=$2; shift 2
chrt -f 10 taskset -c $cpu timeout $secs bash -c 'while :; do :; done' &
hog=$!
sleep 0.2
/tmp/ccsh/batch.sh "$@"
kill $hog 2>/dev/null; wait $hog 2>/dev/null
