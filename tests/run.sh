#!/usr/bin/env bash
# Run the tests, each under a time bound, and print "N passed, N failed".
#   tests/run.sh BUILD_DIR                 every build/tests/test_* program and tests/test_*.sh
#   tests/run.sh BUILD_DIR NAME...         just those
#   tests/run.sh BUILD_DIR --only-sanitizers   just the sanitizer subsets
# With LIBLOCK_TSAN_BUILD/LIBLOCK_TSAN_TESTS (ThreadSanitizer) and
# LIBLOCK_ASAN_BUILD/LIBLOCK_ASAN_TESTS (AddressSanitizer + UBSan + leak
# checking) set, those programs also run from the sanitizer builds at a
# smaller scale.
set -u
build=${1:-build}; shift || true
cd "$(dirname "$0")/.." || exit 2
only_san=0
if [ "${1:-}" = "--only-sanitizers" ]; then only_san=1; shift; fi
tests=()
if [ $# -gt 0 ]; then tests=("$@");
elif [ $only_san -eq 0 ]; then
  for f in "$build"/tests/test_*; do [ -x "$f" ] && tests+=("$(basename "$f")"); done
  for f in tests/test_*.sh; do [ -f "$f" ] && tests+=("$(basename "$f")"); done
fi
if [ $# -eq 0 ]; then
  [ -n "${LIBLOCK_TSAN_BUILD:-}" ] && for t in ${LIBLOCK_TSAN_TESTS:-}; do tests+=("tsan:$t"); done
  [ -n "${LIBLOCK_ASAN_BUILD:-}" ] && for t in ${LIBLOCK_ASAN_TESTS:-}; do tests+=("asan:$t"); done
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
    asan:*) cmd=("$LIBLOCK_ASAN_BUILD/tests/${t#asan:}")
            envs=(LIBLOCK_TEST_SCALE=small "ASAN_OPTIONS=detect_leaks=1 ${ASAN_OPTIONS:-}") ;;
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
