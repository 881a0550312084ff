#!/usr/bin/env bash
# Run test programs under a time bound and print "N passed, N failed".
# usage: tests/run.sh BUILD_DIR [TEST_NAME...]
set -u
build=${1:-build}; shift || true
cd "$(dirname "$0")/.." || exit 2
if [ $# -gt 0 ]; then tests=("$@"); else
  tests=(); for f in "$build"/tests/test_*; do [ -x "$f" ] && tests+=("$(basename "$f")"); done
  for f in tests/test_*.sh; do [ -f "$f" ] && tests+=("$(basename "$f")"); done
fi
limit=${LIBLOCK_TEST_LIMIT:-900}
pass=0; fail=0; failed=()
for t in "${tests[@]}"; do
  start=$(date +%s.%N)
  if [[ "$t" == *.sh ]]; then cmd=(bash "tests/$t" "$build"); else cmd=("$build/tests/$t"); fi
  echo "=== $t"
  if timeout -k 10 "$limit" "${cmd[@]}"; then
    pass=$((pass+1)); status=ok
  else
    rc=$?; fail=$((fail+1)); failed+=("$t"); status="FAILED (exit $rc)"
  fi
  printf '=== %s %s (%.1f s)\n' "$t" "$status" "$(echo "$(date +%s.%N) - $start" | bc)"
done
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
