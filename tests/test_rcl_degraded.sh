#!/usr/bin/env bash
# Degraded RCL mode (no SCHED_FIFO, forced by LIBLOCK_RCL_DEGRADED=1): the
# same stress test as the full runtime, then the RCL behaviour tests.
# Also checks that LIBLOCK_STATS=1 prints the per-server statistics at exit.
# usage: tests/test_rcl_degraded.sh BUILD_DIR
set -u
build=${1:-build}
fail=0
LIBLOCK_RCL_DEGRADED=1 "$build/tests/test_stress" rcl || fail=1
out=$(LIBLOCK_RCL_DEGRADED=1 LIBLOCK_STATS=1 "$build/tests/test_rcl" 2>&1) || { echo "$out"; fail=1; }
echo "$out" | grep -q 'degraded mode' || { echo "FAIL: no degraded-mode warning"; fail=1; }
echo "$out" | grep -q '^liblock: rcl server cpu [0-9]* (degraded): [0-9]* CS' || { echo "FAIL: LIBLOCK_STATS=1 printed no server statistics"; fail=1; }
echo "$out" | tail -1
[ $fail -eq 0 ] && echo "test_rcl_degraded: ok" || echo "test_rcl_degraded: FAILED"
exit $fail
