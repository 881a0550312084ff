#!/bin/bash
# usage: run.sh WT APP THREADS VARIANT...   variant: glibc | rcl:WAIT[:ENV=V,ENV=V]
wt=$1; app=$2; th=$3; shift 3
case $app in
 bbuf) cmd="$wt/build/bin/apps/bbuf $th 50000";;
 sqlite) cmd="$wt/build/bin/apps/sqlite_threads $th $((40000/th))";;
 pyqueue) cmd="/root/.pyenv/versions/3.11.7/bin/python3 $wt/bench/apps/pyqueue.py $th 20000";;
esac
for v in "$@"; do
  if [ "$v" = glibc ]; then
    s=$(date +%s.%N); timeout 60 $cmd >/dev/null; rc=$?
  else
    IFS=: read -r _ w envs <<<"$v"
    s=$(date +%s.%N); env ${envs//,/ } LD_PRELOAD=$wt/build/lib/liblock-interpose.so LIBLOCK_LOCK=rcl LIBLOCK_STRICT=1 ${w:+LIBLOCK_WAIT=$w} timeout ${TMO:-30} $cmd >/dev/null 2>/tmp/rcl-apps/err; rc=$?
  fi
  e=$(date +%s.%N); printf "%s %s %s %-40s %.3f rc=%d\n" "$app" "$th" "$(basename $wt)" "$v" "$(echo "$e - $s" | bc)" $rc
done
