#!/usr/bin/env bash
# `liblock list` shows the x86 user-mode waiting instructions in its machine
# section (issue 15): "available" or "not available" for WAITPKG
# (UMWAIT/TPAUSE) and MONITORX/MWAITX, in agreement with the CPU flags the
# kernel reports in /proc/cpuinfo, and the hybrid locks are listed.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
out=$(tools/liblock list 2>&1) || { echo "test_list_machine: liblock list failed"; echo "$out"; exit 1; }
fail=0
check_flag() { # label cpuinfo-flag
  local line want
  line=$(grep -F "  $1" <<<"$out")
  if grep -qw "$2" /proc/cpuinfo; then want=available; else want="not available"; fi
  if [ -z "$line" ]; then echo "test_list_machine: no '$1' line"; fail=1; return; fi
  case "$line" in
    *"not available"*) got="not available" ;;
    *available*) got=available ;;
    *) got="?" ;;
  esac
  [ "$got" = "$want" ] || { echo "test_list_machine: '$line' but /proc/cpuinfo says $want"; fail=1; }
}
check_flag "UMWAIT/TPAUSE (WAITPKG)" waitpkg
check_flag "MONITORX/MWAITX" mwaitx
for a in hyblock hybcomb; do
  grep -q "^$a " <<<"$out" || { echo "test_list_machine: $a not listed"; fail=1; }
done
"$build/bin/liblock-info" --machine | python3 -c 'import json,sys; d=json.load(sys.stdin); assert {"cpus","waitpkg","monitorx","uwait"} <= set(d), d' \
  || { echo "test_list_machine: liblock-info --machine is not the expected JSON"; fail=1; }
[ $fail -eq 0 ] && echo "test_list_machine: ok"
exit $fail
