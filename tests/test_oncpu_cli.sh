#!/usr/bin/env bash
# test_oncpu_cli.sh BUILD - `liblock oncpu load|unload|status` and the
# loading `liblock run` does (tools/liblock_cli/oncpu.py,
# tools/liblock-oncpu.c).  As root, from a machine where the program is not
# loaded:
#  - status exits 3 and says "loaded: no"; load exits 0; status exits 0,
#    names both pins and counts one program named liblock_oncpu2 in the
#    kernel; a second load says "already loaded" and the count stays 1;
#  - `liblock list` (run as root) reports the ebpf mechanism, and as an
#    unprivileged user (when `su nobody` works) the fallback, with the
#    cause, and its status says loaded, not verified; LIBLOCK_ONCPU=none
#    reports none;
#  - a program under the interposer that never calls ll_oncpu does not
#    map the BPF map (nothing is resolved at start-up);
#  - unload exits 0, removes both pins, status exits 3 and counts no
#    program, and /sys/fs/bpf is mounted afterwards exactly when it was
#    before the test;
#  - four loads started at once make one program and one bpffs mount;
#  - `liblock run --lock mcs -- true` loads it (and leaves it loaded: it is
#    shared by every later process); with LIBLOCK_ONCPU=fallback it does
#    not.  What the test loaded it unloads.
# Loaded before the test (an earlier `liblock run` as root leaves it
# loaded): it is unloaded first, the checks run as from an unloaded machine,
# and it is loaded again at the end.  Not root: load must fail, the fallback
# is reported, the rest is skipped.
. "$(dirname "$0")/lib.sh" "$@"
export LIBLOCK_BUILD="$build"
L="tools/liblock"
map=/sys/fs/bpf/liblock/oncpu_map link=/sys/fs/bpf/liblock/oncpu_link
bpffs_before=$(mount | grep -c " /sys/fs/bpf type bpf")
progs() { "$build/bin/liblock-oncpu" status | sed -n 's/^programs: \([0-9-]*\) .*/\1/p'; }
list_line() { grep -F "thread on a CPU (ll_oncpu)" <<<"$1"; }

out=$(LIBLOCK_ONCPU=none $L list 2>&1)
case "$(list_line "$out")" in *"none: LIBLOCK_ONCPU=none"*) ok ;; *) fail "LIBLOCK_ONCPU=none: '$(list_line "$out")'" ;; esac

if [ "$(id -u)" -ne 0 ]; then
  $L oncpu load >"$tmp/o" 2>&1 && fail "load as $(id -un) succeeded" || ok
  out=$($L list 2>&1)
  case "$(list_line "$out")" in *"fallback:"*) ok ;; *) fail "not root: '$(list_line "$out")'" ;; esac
  skip "oncpu load/unload: not root"
  finish
fi

$L oncpu status >"$tmp/s0"; rc=$?
was_loaded=0
if [ $rc -eq 0 ]; then
  was_loaded=1
  $L oncpu unload >"$tmp/o" 2>&1 && ok || fail "unload of the program loaded before the test: $(cat "$tmp/o")"
  bpffs_before=$(mount | grep -c " /sys/fs/bpf type bpf")
  $L oncpu status >"$tmp/s0"; rc=$?
fi
[ $rc -eq 3 ] && grep -q "^loaded: no" "$tmp/s0" && ok || fail "status before the load: exit $rc, $(head -1 "$tmp/s0")"
[ "$(progs)" = 0 ] && ok || fail "programs: $(progs) before the load"

$L oncpu load >"$tmp/o" 2>&1 && ok || fail "load: $(cat "$tmp/o")"
$L oncpu status >"$tmp/s1"; rc=$?
[ $rc -eq 0 ] && grep -q "^loaded: yes" "$tmp/s1" && ok || fail "status after the load: exit $rc, $(cat "$tmp/s1")"
grep -qF "map: $map" "$tmp/s1" && grep -qF "link: $link" "$tmp/s1" && ok || fail "status does not name the pins: $(cat "$tmp/s1")"
[ "$(progs)" = 1 ] && ok || fail "programs: $(progs) after one load"
$L oncpu load >"$tmp/o" 2>&1 && grep -q "already loaded" "$tmp/o" && ok || fail "second load: $(cat "$tmp/o")"
[ "$(progs)" = 1 ] && ok || fail "programs: $(progs) after two loads"

out=$($L list 2>&1)
case "$(list_line "$out")" in *"ebpf: sched_switch program"*) ok ;; *) fail "root, loaded: '$(list_line "$out")'" ;; esac
if su nobody -s /bin/sh -c "test -x '$build/bin/liblock-info'" 2>/dev/null; then
  out=$(su nobody -s /bin/sh -c "'$build/bin/liblock-info' --machine" 2>&1)
  case "$out" in *'"oncpu": "fallback"'*"not root"*) ok ;; *) fail "as nobody: $out" ;; esac
  out=$(su nobody -s /bin/sh -c "'$build/bin/liblock-oncpu' status"); rc=$?
  [ $rc -eq 0 ] && grep -q "^loaded: yes, not verified" <<<"$out" && ok || fail "status as nobody: exit $rc, $out"
else
  skip "liblock-info as an unprivileged user: su nobody cannot run $build/bin/liblock-info"
fi

n=$($L run --lock mcs -- grep -c anon_inode:bpf-map /proc/self/maps)
[ "$n" = 0 ] && ok || fail "a program under the interposer maps the BPF map at start-up ($n)"

$L oncpu unload >"$tmp/o" 2>&1 && ok || fail "unload: $(cat "$tmp/o")"
[ ! -e "$map" ] && [ ! -e "$link" ] && ok || fail "pins left after unload: $(ls /sys/fs/bpf/liblock 2>&1)"
$L oncpu status >"$tmp/s2"; rc=$?
[ $rc -eq 3 ] && ok || fail "status after unload: exit $rc"
[ "$(progs)" = 0 ] && ok || fail "programs: $(progs) after unload"
[ "$(mount | grep -c " /sys/fs/bpf type bpf")" = "$bpffs_before" ] && ok || fail "bpffs mounted: $bpffs_before before, not after"

for i in 1 2 3 4; do "$build/bin/liblock-oncpu" load >"$tmp/p$i" 2>&1 & done
wait
[ "$(progs)" = 1 ] && [ "$(mount | grep -c " /sys/fs/bpf type bpf")" = 1 ] && ok \
  || fail "four loads at once: programs $(progs), bpffs mounted $(mount | grep -c " /sys/fs/bpf type bpf") times: $(cat "$tmp"/p*)"
"$build/bin/liblock-oncpu" unload >/dev/null
[ ! -e "$map" ] && [ "$(progs)" = 0 ] && [ "$(mount | grep -c " /sys/fs/bpf type bpf")" = "$bpffs_before" ] && ok \
  || fail "unload after four loads at once"

LIBLOCK_ONCPU=fallback $L run --lock mcs -- true && ok || fail "liblock run (fallback forced) failed"
[ ! -e "$map" ] && ok || fail "liblock run with LIBLOCK_ONCPU=fallback loaded the program"
$L run --lock mcs -- true && ok || fail "liblock run failed"
[ -e "$map" ] && [ -e "$link" ] && [ "$(progs)" = 1 ] && ok || fail "liblock run as root did not load the program"
$L run --lock mcs -- true && [ "$(progs)" = 1 ] && ok || fail "a second liblock run: programs $(progs)"
$L oncpu unload >/dev/null 2>&1
[ ! -e "$map" ] && [ "$(progs)" = 0 ] && ok || fail "unload after liblock run"
if [ $was_loaded = 1 ]; then # as it was found
  $L oncpu load >"$tmp/o" 2>&1 && [ "$(progs)" = 1 ] && ok || fail "loading it again: $(cat "$tmp/o")"
fi
finish
