#!/usr/bin/env bash
# test_profile_ubsan.sh [BUILD] - the profiler's own test (tests/test_profile.sh)
# with the profiler runtime built under UndefinedBehaviorSanitizer, aborting
# at the first report (-fno-sanitize-recover): build-ubsan/lib/liblock-profile.so
# (`make ubsan-preload`, part of `make test`; built here when missing).  ASan
# and TSan cannot be used in a preloaded library (their runtimes must be the
# first library loaded), so UBSan is what the preload libraries get.
set -u
cd "$(dirname "$0")/.." || exit 2
ub=build-ubsan
# the profiler runtime and every program of the interposer's mutex test
# (test_interpose --topics), which tests/test_profile.sh runs under it
missing() {
  [ -f "$ub/lib/liblock-profile.so" ] && [ -x "$ub/tests/test_interpose" ] || return 0
  for t in $("$ub/tests/test_interpose" --topics); do [ -x "$ub/tests/$t" ] || return 0; done
  return 1
}
if missing; then
  make -s ubsan-preload >/dev/null || { echo "FAIL: cannot build $ub (make ubsan-preload)"; exit 1; }
fi
ldd "$ub/lib/liblock-profile.so" | grep -q libubsan || { echo "FAIL: $ub/lib/liblock-profile.so is not built with UBSan"; exit 1; }
exec bash tests/test_profile.sh "$ub"
