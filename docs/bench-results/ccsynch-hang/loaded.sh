#!/bin/bash
# usage: loaded.sh NYES algo n [args]: batch.sh with NYES `yes` hogs (unpinned) during the batch
ny=$1; shift
pids=()
for j in $(seq 1 $ny); do yes > /dev/null & pids+=($!); done
/tmp/ccsh/batch.sh "$@"
for p in "${pids[@]}"; do kill $p; done
