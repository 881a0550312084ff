"""`liblock oncpu load|unload|status`: the system-wide eBPF program that tells
whether a thread is on a CPU (docs/oncpu.md).

`load` (root) loads the sched_switch program and pins it with its map under
/sys/fs/bpf/liblock, once for the whole machine (a second load finds it and
does nothing); every process that uses ll_oncpu then only opens the pinned
map.  `unload` removes the pins (the program goes with them); `status` says
what is pinned and which mechanism a process started by you would use, and
exits 0 when the program is loaded, 3 when it is not.  The work is done by
build/bin/liblock-oncpu.
"""
import os
import subprocess
import sys

HELP = "load, unload or report the eBPF program behind preemption-aware waiting (ll_oncpu)"
ACTIONS = ("load", "unload", "status")
MAP_PIN = "/sys/fs/bpf/liblock/oncpu_map"
LINK_PIN = "/sys/fs/bpf/liblock/oncpu_link"


def add_arguments(p):
    p.add_argument("action", metavar="ACTION", help="load (root), unload (root) or status")


def pinned():
    """Both pins are there (what `liblock run` looks at before asking the loader)."""
    return os.path.exists(MAP_PIN) and os.path.exists(LINK_PIN)


def should_load(euid, is_pinned, environ):
    """Whether `liblock run` loads the program before it starts the program: as root, when it
    is not pinned, unless LIBLOCK_ONCPU chooses another mechanism than ebpf."""
    forced = environ.get("LIBLOCK_ONCPU", "")
    return euid == 0 and not is_pinned and forced in ("", "ebpf")


def ensure_loaded(env, environ):
    """For `liblock run`: load the program if should_load says so.  A failure is one line on
    stderr and the program runs with the fallback; None or that line."""
    if not should_load(os.geteuid(), pinned(), environ):
        return None
    try:
        out = subprocess.run([env.program("liblock-oncpu"), "load"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"liblock run: oncpu program not loaded ({e}); the program uses the fallback"
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[0]
        return f"liblock run: oncpu program not loaded ({why}); the program uses the fallback"
    return None


def run(args, env):
    if args.action not in ACTIONS:
        print(f"liblock oncpu: unknown action '{args.action}' (valid: {' '.join(ACTIONS)})", file=sys.stderr)
        return 2
    return subprocess.run([env.program("liblock-oncpu"), args.action]).returncode
