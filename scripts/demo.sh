#!/usr/bin/env bash
# make demo: the headline comparison (<= 3 minutes).  Every registered
# algorithm on the lockbench contention microbenchmark (thesis section 5.2) at
# high contention (100 cycles between critical sections) and low contention
# (2e6 cycles), with 1 and 5 shared lines, T = number of CPUs, 5 interleaved
# repetitions, a ping-pong probe before and after every run; printed as a
# table of ratios against posix within one probe regime, plus a plot.
# LIBLOCK_DEMO_BUDGET (seconds, default 120) sets the time of the sweep.
set -eu
build=${1:-build}; shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
case "$build" in /*) ;; *) build="$root/$build" ;; esac
echo "liblock demo: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -r)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other processes on the CPUs make the numbers noisy)"
LIBLOCK_BUILD="$build" python3 "$root/tools/liblock" bench headline --budget "${LIBLOCK_DEMO_BUDGET:-120}" "$@"
