# tests/lib.sh - the preamble every shell test shares.  A test starts with
#     . "$(dirname "$0")/lib.sh" "$@"
# and ends with `finish`.  After sourcing:
#   root    the repository (absolute); the working directory is root
#   build   the build directory given as the first argument (default
#           "build"), made absolute
#   tmp     a private directory, removed at exit (files made read-only in it
#           too)
#   testname  the test's name (its file name without .sh)
#   ok          count a check that passed
#   fail WHAT   count a check that failed and print "FAIL: WHAT"
#   skip CAUSE  print "SKIP: CAUSE": a part that did not run (tests/run.sh
#               lists the test as partly skipped; exit 77 skips it whole)
#   finish      print "NAME: N checks, F failed" (a test that counts only
#               failures: "NAME: all passed" or "NAME: F failed") and exit 1
#               if any failed
# `set -u` is on; nothing else about the shell is changed.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
build=${1:-build}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
testname=$(basename "$0" .sh)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$testname.XXXXXX") || { echo "FAIL: cannot make a temporary directory"; exit 1; }
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
checks=0
fails=0
ok() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }
skip() { echo "SKIP: $*"; }
finish() {
    if [ "$checks" -gt "$fails" ]; then echo "$testname: $checks checks, $fails failed"
    elif [ "$fails" -eq 0 ]; then echo "$testname: all passed"
    else echo "$testname: $fails failed"; fi
    [ "$fails" -eq 0 ] || exit 1
    exit 0
}
