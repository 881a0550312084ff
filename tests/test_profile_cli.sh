#!/usr/bin/env bash
# test_profile_cli.sh BUILD - `liblock profile` and `liblock run --config`.
#
#  - tests/profile/test_cli.py: the report from hand-written raw dumps
#    (exact JSON fields, ranking, grouping, advice at known shares), the
#    --advise file re-read, the configuration grammar, bad input (one line,
#    the right exit status, the program never started), and how a program is
#    run (terminal, exit status, 128+N on a signal with the report, SIGKILL,
#    SIGUSR1 snapshots) with a stand-in runtime (tests/profile/fake_runtime.c);
#  - tests/profile/test_e2e.py (build/lib/liblock-profile.so must exist): the
#    real runtime on a program with a hot and a cold lock (exact counts,
#    ranking, file:line sites) and on lockbench (the share of time in
#    critical sections against lockbench's own figures).
# Asserts no timing.
. "$(dirname "$0")/lib.sh" "$@"
CC=${CC:-cc}
"$CC" -O2 -shared -fPIC -o "$tmp/fake_runtime.so" tests/profile/fake_runtime.c || exit 1
"$CC" -O2 -o "$tmp/prog" tests/profile/prog.c || exit 1
python3 tests/profile/test_cli.py "$root" "$build" "$tmp" "$tmp/fake_runtime.so" "$tmp/prog" && ok || fail "tests/profile/test_cli.py"
# The build always makes the profiler: its absence is a failure, not a skip.
if [ -e "$build/lib/liblock-profile.so" ]; then
  python3 tests/profile/test_e2e.py "$root" "$build" "$tmp" && ok || fail "tests/profile/test_e2e.py"
else
  fail "end-to-end part: $build/lib/liblock-profile.so missing (run make)"
fi
finish
