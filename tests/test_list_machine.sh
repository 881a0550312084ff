#!/usr/bin/env bash
# `liblock list` shows the x86 user-mode waiting instructions in its machine
# section: "available" or "not available" for WAITPKG
# (UMWAIT/TPAUSE) and MONITORX/MWAITX, in agreement with the CPU flags the
# kernel reports in /proc/cpuinfo, and the hybrid locks are listed.  Its
# "thread on a CPU (ll_oncpu)" line names the mechanism liblock-info --machine
# reports, with its reason; LIBLOCK_ONCPU=none and =fallback are reported as
# such.
. "$(dirname "$0")/lib.sh" "$@"
export LIBLOCK_BUILD="$build"
out=$(tools/liblock list 2>&1) || { echo "FAIL: liblock list failed"; echo "$out"; exit 1; }
check_flag() { # label cpuinfo-flag
  local line want
  line=$(grep -F "  $1" <<<"$out")
  if grep -qw "$2" /proc/cpuinfo; then want=available; else want="not available"; fi
  if [ -z "$line" ]; then fail "no '$1' line"; return; fi
  case "$line" in
    *"not available"*) got="not available" ;;
    *available*) got=available ;;
    *) got="?" ;;
  esac
  [ "$got" = "$want" ] && ok || fail "'$line' but /proc/cpuinfo says $want"
}
check_flag "UMWAIT/TPAUSE (WAITPKG)" waitpkg
check_flag "MONITORX/MWAITX" mwaitx
for a in hyblock hybcomb; do
  grep -q "^$a " <<<"$out" && ok || fail "$a not listed"
done
"$build/bin/liblock-info" --machine | python3 -c 'import json,sys; d=json.load(sys.stdin); assert {"cpus","waitpkg","monitorx","uwait","oncpu","oncpu_reason"} <= set(d), d' \
  && ok || fail "liblock-info --machine is not the expected JSON"
mech=$("$build/bin/liblock-info" --machine | python3 -c 'import json,sys; print(json.load(sys.stdin)["oncpu"])')
line=$(grep -F "  thread on a CPU (ll_oncpu) " <<<"$out")
case "$line" in *"(ll_oncpu) $mech: "?*) ok ;; *) fail "ll_oncpu line '$line' for mechanism '$mech'" ;; esac
for m in none fallback; do
  line=$(LIBLOCK_ONCPU=$m tools/liblock list 2>&1 | grep -F "  thread on a CPU (ll_oncpu) ")
  case "$line" in *"(ll_oncpu) $m: "*"LIBLOCK_ONCPU=$m"*) ok ;; *) fail "LIBLOCK_ONCPU=$m: '$line'" ;; esac
done
finish
