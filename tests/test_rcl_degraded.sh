#!/usr/bin/env bash
# Degraded RCL mode (no SCHED_FIFO, forced by LIBLOCK_RCL_DEGRADED=1): the
# same stress test as the full runtime, then the RCL behaviour tests.
# Also checks that LIBLOCK_STATS=1 prints the per-server statistics at exit.
# usage: tests/test_rcl_degraded.sh BUILD_DIR
. "$(dirname "$0")/lib.sh" "$@"
LIBLOCK_RCL_DEGRADED=1 "$build/tests/test_stress" rcl && ok || fail "test_stress rcl in degraded mode"
out=$(LIBLOCK_RCL_DEGRADED=1 LIBLOCK_STATS=1 "$build/tests/test_rcl" 2>&1) && ok || { echo "$out"; fail "test_rcl in degraded mode"; }
echo "$out" | grep -q 'degraded mode' && ok || fail "no degraded-mode warning"
echo "$out" | grep -q '^liblock: rcl server cpu [0-9]* (degraded): [0-9]* CS' && ok || fail "LIBLOCK_STATS=1 printed no server statistics"
echo "$out" | tail -1
finish
