#!/usr/bin/env bash
# Run the tests, each under a time bound, and print "N passed, N failed, N skipped".
# A test that exits 77 is skipped (its "SKIP: cause" lines say why), never passed;
# a test that passes but printed "SKIP: cause" for a part it could not run is
# listed as partly skipped with its causes.
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
pass=0; fail=0; skip=0; failed=(); skipped=(); partly=()
out=$(mktemp); trap 'rm -f "$out"' EXIT
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
  # To a file, then shown: a process a test leaves behind cannot hold the run up.
  env "${envs[@]}" timeout -k 10 "$limit" "${cmd[@]}" > "$out" 2>&1
  rc=$?
  cat "$out"
  causes=$(sed -n 's/^SKIP: //p' "$out" | sort -u | paste -sd ';' -)
  if [ "$rc" -eq 0 ]; then
    pass=$((pass+1)); status=ok
    [ -n "$causes" ] && { partly+=("$t: $causes"); status="ok, partly skipped: $causes"; }
  elif [ "$rc" -eq 77 ]; then
    skip=$((skip+1)); skipped+=("$t: ${causes:-no cause given}"); status="SKIPPED: ${causes:-no cause given}"
  else
    fail=$((fail+1)); failed+=("$t"); status="FAILED (exit $rc)"
  fi
  end=$(date +%s%N)
  echo "=== $t $status ($(( (end - start) / 1000000 )) ms)"
done
echo
echo "total $(( $(date +%s) - t_all )) s"
for x in "${partly[@]}"; do echo "partly skipped: $x"; done
for x in "${skipped[@]}"; do echo "skipped: $x"; done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
