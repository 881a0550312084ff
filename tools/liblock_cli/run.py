"""`liblock run`: run an unmodified program with every pthread mutex and
condition variable replaced by a liblock algorithm, and (with --sem) every
private semaphore by a liblock semaphore (docs/interpose.md).

Names are checked against the registry (`liblock-info`) before the program
starts; the program then replaces this process (execve) with
LD_PRELOAD=liblock-interpose.so and the LIBLOCK_* variables set, so its exit
status, or the signal that killed it, is exactly what the caller sees.
With --config FILE (a per-site configuration, docs/profile.md: which
algorithm each lock initialisation site runs on, every other lock keeping
glibc's mutex), LIBLOCK_CONFIG is set; the file is checked first by
build/bin/liblock-config-check (the interposer's own parser) when it exists,
else by a Python pre-validation of the same grammar (_siteconfig.py), so a bad
line stops here with one line instead of after the program started.
LIBLOCK_CALIBRATION is set to the machine's figures (cycle rate, spin
budget; `liblock-info --calibration`, which reads them from the machine's
cache or measures them once), so that no process of the program, however
many it starts, measures them again.
LIBLOCK_STRICT=1 is set so that anything the interposer itself cannot honour
(for example mostly-LIFO condition variables in a build without them) stops
the program with a one-line message instead of running it differently.
As root, the system-wide eBPF program behind ll_oncpu is loaded when it is
not pinned yet (`liblock oncpu load`, unless LIBLOCK_ONCPU names another
mechanism) and left loaded for every later process; `liblock oncpu unload`
removes it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

from . import _siteconfig
from . import list as list_cmd
from . import _autochoice, oncpu
from ._profadvice import load_thresholds

HELP = "run an unmodified program with its pthread locks (and, with --sem, semaphores) replaced by liblock's"
CONDS = ("fifo", "mostly-lifo", "glibc")
SEMS = ("fifo", "mostly-lifo")
USAGE = "liblock run [--lock NAME] [--wait POLICY] [--config FILE] [--cond KIND] [--sem KIND] [--eager] -- PROGRAM ARGS..."
WAITS = ("spin", "spin-then-park", "yield", "park", "preempt-aware")


def add_arguments(p):
    p.add_argument("--lock", metavar="NAME",
                   help="algorithm for every pthread mutex (see `liblock list`); required unless --sem is given")
    p.add_argument("--wait", metavar="POLICY", help="waiting policy: " + ", ".join(WAITS))
    p.add_argument("--config", metavar="FILE",
                   help="per-site configuration (docs/profile.md; `liblock profile --advise` writes one): "
                        "an algorithm per lock initialisation site, glibc's mutex for the others; "
                        "with --lock, the algorithm of the locks it does not name")
    p.add_argument("--cond", metavar="KIND",
                   help="condition variables: fifo (default: a queue of waiters, each spinning for the spin "
                        "budget before it sleeps), mostly-lifo (the same queue, waiters woken mostly newest-first; "
                        "FIFO probability from LIBLOCK_COND_FIFO_PROB, default 0.001) or glibc (glibc's condition "
                        "variable behind an inner mutex; requeues waiters onto mcs)")
    p.add_argument("--sem", metavar="KIND",
                   help="replace sem_init/sem_wait/sem_post/... of private semaphores by liblock semaphores: "
                        "fifo or mostly-lifo (FIFO probability from LIBLOCK_SEM_FIFO_PROB, else "
                        "LIBLOCK_COND_FIFO_PROB, default 0.001); named and process-shared semaphores stay "
                        "glibc's. Without --sem every semaphore is glibc's")
    p.add_argument("--eager", action="store_true",
                   help="every mutex on its algorithm from its first lock (LIBLOCK_LAZY=0); by default a "
                        "mutex is a one-word lock until its first contention, condition wait or delegated "
                        "section, and on its algorithm from then on (docs/interpose.md, \"Lazy engagement\")")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS",
                   help="the program and its arguments")


def lock_wait_problem(algos, lock, wait):
    """The one-line problem with --lock NAME [--wait POLICY], or None (shared with `liblock profile`)."""
    if lock not in algos:
        return f"unknown lock '{lock}' (valid: {' '.join(sorted(algos))})"
    if wait is not None:
        if wait not in WAITS:
            return f"unknown waiting policy '{wait}' (valid: {' '.join(WAITS)})"
        if wait not in algos[lock]["policies"]:
            return (f"lock '{lock}' does not support waiting policy '{wait}' "
                    f"(valid: {' '.join(algos[lock]['policies'])})")
    return None


def calibration(env, child_env):
    """The machine's figures (cycle rate, spin budget) for LIBLOCK_CALIBRATION, measured once here
    (or read from the machine's cache, src/platform/calibration.c) so that no process of the
    program measures them again; None if they cannot be had (the program then looks for them itself)."""
    have = child_env.get("LIBLOCK_CALIBRATION")
    if have and re.fullmatch(r"[0-9.]+,[0-9]+", have):
        return have  # a `liblock run` inside another: the figures it was given
    info = os.path.join(env.bindir, "liblock-info")
    try:
        out = subprocess.run([info, "--calibration"], env={k: v for k, v in child_env.items()
                                                            if k not in ("LD_PRELOAD", "LIBLOCK_CALIBRATION")},
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    figures = out.stdout.strip()
    return figures if out.returncode == 0 and re.fullmatch(r"[0-9.]+,[0-9]+", figures) else None


def fail(msg):
    print(f"liblock run: {msg}", file=sys.stderr)
    return 2


def run(args, env):
    cmd = list(args.program)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        return fail(f"no program given (usage: {USAGE})")
    algos = {a["name"]: a for a in list_cmd.algorithms(env)}
    if args.lock is None:
        if args.sem is None and args.config is None:
            return fail(f"give --lock NAME, --config FILE, --sem KIND or a combination (usage: {USAGE})")
        if args.wait is not None or (args.cond is not None and args.config is None):
            return fail("--wait and --cond apply to the lock: give --lock NAME as well")
    else:
        problem = lock_wait_problem(algos, args.lock, args.wait)
        if problem:
            return fail(problem)
    if args.cond is not None and args.cond not in CONDS:
        return fail(f"unknown condition variable kind '{args.cond}' (valid: {' '.join(CONDS)})")
    if args.sem is not None and args.sem not in SEMS:
        return fail(f"unknown semaphore kind '{args.sem}' (valid: {' '.join(SEMS)})")
    if args.config is not None:
        problem = _siteconfig.validate(args.config, algos, os.path.join(env.bindir, "liblock-config-check"))
        if problem:
            print(problem, file=sys.stderr)
            return 2
    prog = cmd[0]
    path = prog if os.sep in prog else shutil.which(prog)
    if not path or not os.path.isfile(path):
        return fail(f"program not found: {prog}")
    if not os.access(path, os.X_OK):
        return fail(f"program is not executable: {prog}")
    lib = env.lib("liblock-interpose.so")
    if not os.path.exists(lib):
        return fail(f"{lib} is missing (run `make` first)")

    child_env = dict(os.environ)
    pre = child_env.get("LD_PRELOAD", "")
    child_env["LD_PRELOAD"] = lib + (" " + pre if pre else "")
    if args.lock is not None:
        child_env["LIBLOCK_LOCK"] = args.lock
    else:
        child_env.pop("LIBLOCK_LOCK", None)  # semaphores only: mutexes stay glibc's
    if args.wait is not None:
        child_env["LIBLOCK_WAIT"] = args.wait
    else:
        child_env.pop("LIBLOCK_WAIT", None)
    if args.config is not None:
        child_env["LIBLOCK_CONFIG"] = os.path.abspath(args.config)
    else:
        child_env.pop("LIBLOCK_CONFIG", None)
    if args.cond is not None:
        child_env["LIBLOCK_COND"] = args.cond
    if args.sem is not None:
        child_env["LIBLOCK_SEM"] = args.sem
    else:
        child_env.pop("LIBLOCK_SEM", None)
    if args.eager:
        child_env["LIBLOCK_LAZY"] = "0"
    child_env["LIBLOCK_STRICT"] = "1"
    # a transformed program's delegated sections run with their caller's identity (docs/interpose.md)
    child_env.setdefault("LIBLOCK_IDENTITY", "1")
    note = oncpu.ensure_loaded(env, child_env)
    if note:
        print(note, file=sys.stderr)
    if child_env.get("LIBLOCK_LOCK") == "auto":
        note = _autochoice.auto_env(child_env, load_thresholds)
        if note:
            print(note, file=sys.stderr)
    figures = calibration(env, child_env)
    if figures:
        child_env["LIBLOCK_CALIBRATION"] = figures
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(path, cmd, child_env)  # the program replaces us: its exit status is ours
    except OSError as e:
        return fail(f"cannot run {prog}: {e.strerror}")
