#!/usr/bin/env bash
# Pacing of spin clients (LIBLOCK_RCL_YIELD_EVERY, docs/rcl.md "Waiting
# policies"): the RCL stress test (exact counts, 1..64 client threads,
# lock/unlock and execute) with a yield after every request, with pacing
# off, and a malformed value, which must be reported in one line and
# replaced by the default.
# usage: tests/test_rcl_pacing.sh BUILD_DIR
set -u
build=${1:-build}
fail=0
LIBLOCK_RCL_YIELD_EVERY=1 "$build/tests/test_stress" rcl >/dev/null || { echo "FAIL: stress with a yield after every request"; fail=1; }
LIBLOCK_RCL_YIELD_EVERY=0 "$build/tests/test_stress" rcl >/dev/null || { echo "FAIL: stress with pacing off"; fail=1; }
out=$(LIBLOCK_RCL_YIELD_EVERY=often "$build/tests/test_stress" rcl 2>&1) || { echo "$out"; echo "FAIL: stress with a malformed value"; fail=1; }
n=$(echo "$out" | grep -c 'LIBLOCK_RCL_YIELD_EVERY="often" is not an integer')
[ "$n" -eq 1 ] || { echo "FAIL: expected one warning about LIBLOCK_RCL_YIELD_EVERY, got $n"; fail=1; }
[ $fail -eq 0 ] && echo "test_rcl_pacing: ok" || echo "test_rcl_pacing: FAILED"
exit $fail
