#!/usr/bin/env bash
# make demo: the headline comparison.  For now: ns per lock/unlock pair,
# uncontended and two threads on two CPUs, every classic algorithm.
set -eu
build=${1:-build}
echo "liblock demo: $(nproc) CPUs, $(uname -r)"
"$build/bin/pairs" -r 5
