#!/bin/bash
# interleaved before/after rounds
for r in 1 2 3; do
 for app in ${APPS:-bbuf sqlite pyqueue}; do
  for th in 8 16 32; do
   flock /work/bench.lock bash -c "/tmp/rcl-apps/run.sh /work/wt-rcl-apps $app $th glibc rcl:; TMO=20 /tmp/rcl-apps/run.sh /tmp/rcl-apps/before $app $th rcl:" | sed "s/^/round$r /"
  done
 done
done
