#!/usr/bin/env bash
# Pacing of spin clients (LIBLOCK_RCL_YIELD_EVERY, docs/rcl.md "Waiting
# policies"): the RCL stress test (exact counts, 1..64 client threads,
# lock/unlock and execute) with a yield after every request, with pacing
# off, and a malformed value, which must be reported in one line and
# replaced by the default (that run at the small scale: it checks the
# warning and that the default then works).
# usage: tests/test_rcl_pacing.sh BUILD_DIR
. "$(dirname "$0")/lib.sh" "$@"
LIBLOCK_RCL_YIELD_EVERY=1 "$build/tests/test_stress" rcl >/dev/null && ok || fail "stress with a yield after every request"
LIBLOCK_RCL_YIELD_EVERY=0 "$build/tests/test_stress" rcl >/dev/null && ok || fail "stress with pacing off"
out=$(LIBLOCK_RCL_YIELD_EVERY=often LIBLOCK_TEST_SCALE=small "$build/tests/test_stress" rcl 2>&1) && ok || { echo "$out"; fail "stress with a malformed value"; }
n=$(echo "$out" | grep -c 'LIBLOCK_RCL_YIELD_EVERY="often" is not an integer')
[ "$n" -eq 1 ] && ok || fail "expected one warning about LIBLOCK_RCL_YIELD_EVERY, got $n"
finish
