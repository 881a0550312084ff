#!/usr/bin/env bash
# Run the tests, each under a time bound, and print "N passed, N failed".
#   tests/run.sh BUILD_DIR                 every build/tests/test_* program and tests/test_*.sh
#   tests/run.sh BUILD_DIR NAME...         just those
#   tests/run.sh BUILD_DIR --only-tsan     just the ThreadSanitizer subset
# With LIBLOCK_TSAN_BUILD and LIBLOCK_TSAN_TESTS set, the programs named in
# LIBLOCK_TSAN_TESTS are also run from the TSan build at a smaller scale.
set -u
build=${1:-build}; shift || true
cd "$(dirname "$0")/.." || exit 2
only_tsan=0
if [ "${1:-}" = "--only-tsan" ]; then only_tsan=1; shift; fi
tests=()
if [ $# -gt 0 ]; then tests=("$@");
elif [ $only_tsan -eq 0 ]; then
  for f in "$build"/tests/test_*; do [ -x "$f" ] && tests+=("$(basename "$f")"); done
  for f in tests/test_*.sh; do [ -f "$f" ] && tests+=("$(basename "$f")"); done
fi
if [ -n "${LIBLOCK_TSAN_BUILD:-}" ] && [ $# -eq 0 ]; then
  for t in ${LIBLOCK_TSAN_TESTS:-}; do tests+=("tsan:$t"); done
fi
limit=${LIBLOCK_TEST_LIMIT:-900}
pass=0; fail=0; failed=()
t_all=$(date +%s)
for t in "${tests[@]}"; do
  start=$(date +%s%N)
  envs=()
  case "$t" in
    tsan:*) cmd=("$LIBLOCK_TSAN_BUILD/tests/${t#tsan:}")
            envs=(LIBLOCK_TEST_SCALE=tsan "TSAN_OPTIONS=halt_on_error=0 exitcode=66 ${TSAN_OPTIONS:-}") ;;
    *.sh)   cmd=(bash "tests/$t" "$build") ;;
    *)      cmd=("$build/tests/$t") ;;
  esac
  echo "=== $t"
  if env "${envs[@]}" timeout -k 10 "$limit" "${cmd[@]}"; then
    pass=$((pass+1)); status=ok
  else
    rc=$?; fail=$((fail+1)); failed+=("$t"); status="FAILED (exit $rc)"
  fi
  end=$(date +%s%N)
  echo "=== $t $status ($(( (end - start) / 1000000 )) ms)"
done
echo
echo "total $(( $(date +%s) - t_all )) s"
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
