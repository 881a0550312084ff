#!/bin/bash
# rounds of batches; each batch holds /work/bench.lock for ~1-2 min, then releases it
LOG=/tmp/ccsh/driver.log
N=${N:-100}
for round in 1 2 3; do
 for algo in cc-synch dsm-synch; do
  flock /work/bench.lock /tmp/ccsh/loaded.sh 2 $algo $N >> $LOG 2>&1; sleep 2
  PREFIX="taskset -c 0" flock /work/bench.lock /tmp/ccsh/loaded.sh 1 $algo $N -p none >> $LOG 2>&1; sleep 2
  flock /work/bench.lock /tmp/ccsh/loaded.sh 2 $algo $N -p none >> $LOG 2>&1; sleep 2
  flock /work/bench.lock /tmp/ccsh/loaded.sh 2 $algo $N -w park >> $LOG 2>&1; sleep 2
  flock /work/bench.lock /tmp/ccsh/loaded.sh 4 $algo $N -w spin-then-park >> $LOG 2>&1; sleep 2
  PREFIX="taskset -c 0" flock /work/bench.lock /tmp/ccsh/loaded.sh 0 $algo $N -p none -w park >> $LOG 2>&1; sleep 2
 done
done
echo DRIVER-DONE >> $LOG
