"""`liblock profile`: which locks of an unmodified program matter, why, and
what to run them on (docs/profile.md).

The program runs with LD_PRELOAD=liblock-profile.so and LIBLOCK_PROFILE_OUT
set to a temporary file; it keeps this terminal (stdin, stdout, stderr) and
its exit status becomes ours (128+N when signal N killed it, as a shell
says).  When it ends, the runtime's raw dump is aggregated per lock
initialisation site (_profdata.py), each lock gets advice from the thresholds
calibrated on this machine (_profadvice.py, _profcalib.py), and the report is
printed on stderr (_profreport.py), written as JSON (--json), plotted
(--plot) and turned into a per-site configuration for `liblock run --config`
(--advise).  Every output path and option is checked before the program
starts, so a typo never costs a run.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import _autochoice
from . import _profadvice
from . import _profauto
from . import _profcalib
from . import _profdata
from . import _profreport
from . import _runner
from . import _siteconfig
from . import list as list_cmd
from .run import WAITS, lock_wait_problem

HELP = "profile the pthread locks of an unmodified program: hot locks, wait/hold times, advice, per-site config"
USAGE = "liblock profile [options] -- PROGRAM ARGS...  |  liblock profile --calibrate  |  liblock profile --dump RAW"
PROG = "liblock profile"


class Fail(Exception):
    def __init__(self, msg, status=2):
        super().__init__(msg)
        self.status = status


def add_arguments(p):
    p.usage = USAGE
    p.add_argument("--lock", metavar="NAME", help="profile the program running on this algorithm (as `liblock run`)")
    p.add_argument("--wait", metavar="POLICY", help="waiting policy with --lock: " + ", ".join(WAITS))
    p.add_argument("--config", metavar="FILE", help="profile the program on a per-site configuration (as `liblock run --config`)")
    p.add_argument("--only", metavar="ID", help="record only the lock site with this id (16 hex digits, from a report)")
    p.add_argument("--time-every", metavar="N", type=int, default=None,
                   help="time the hold of 1 in N uncontended acquisitions, at random (counts and waits stay exact; "
                        "hold times and hold histograms become estimates): cheaper, for load tests (default 1: time all)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (docs/profile.md, JSON contract)")
    p.add_argument("--plot", metavar="FILE.png", help="plot time share per lock site and the top lock's wait times")
    p.add_argument("--advise", metavar="FILE", help="write a per-site configuration for the locks whose advice is to change")
    p.add_argument("--top", metavar="N", type=int, default=10, help="lock sites in the text report (10)")
    p.add_argument("--thresholds", metavar="FILE", help="advice thresholds to use (default: the calibration in "
                   "$XDG_CACHE_HOME/liblock/thresholds.json, else the shipped defaults); with --calibrate: where to store them")
    p.add_argument("--calibrate", action="store_true", help="measure the advice thresholds on this machine with lockbench (240 short runs: several minutes)")
    p.add_argument("--reps", type=int, default=5, help="with --calibrate: interleaved repetitions (5)")
    p.add_argument("--duration", type=float, default=0.25, help="with --calibrate: seconds per lockbench run (0.25)")
    p.add_argument("--dump", metavar="RAW", help="report on a raw dump written earlier by liblock-profile.so "
                   "(LIBLOCK_PROFILE_OUT) instead of running a program")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS", help="the program and its arguments")

    def one_line_error(message):
        print(f"{PROG}: {message} (usage: {USAGE})", file=sys.stderr)
        sys.exit(2)
    p.error = one_line_error


def _writable(path, what):
    """An output path we will be able to write, checked without touching it."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise Fail(f"{what} {path} is a directory")
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        raise Fail(f"cannot write {what} {path}: directory {d} does not exist")
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise Fail(f"cannot write {what} {path}: permission denied")
    elif not os.access(d, os.W_OK | os.X_OK):
        raise Fail(f"cannot write {what} {path}: directory {d} is not writable")
    return path


def _check_plot(path):
    path = _writable(path, "--plot")
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        kinds = FigureCanvasAgg(Figure()).get_supported_filetypes()
    except ImportError:
        raise Fail("--plot needs matplotlib (scripts/deps.sh installs it)")
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in kinds:
        raise Fail(f"--plot {path}: unknown image type '{ext or '(none)'}' (use .png; also {', '.join(sorted(kinds))})")
    return path


def _check_options(args, env, cmd):
    algos = None
    if args.top < 1:
        raise Fail(f"--top must be at least 1, not {args.top}")
    if args.only is not None and not re.fullmatch(r"[0-9a-f]{16}", args.only):
        raise Fail(f"--only needs a site id of 16 lowercase hex digits (from a report), not '{args.only}'")
    if args.wait is not None and args.lock is None:
        raise Fail("--wait applies to --lock: give --lock NAME as well")
    if args.time_every is not None and not 1 <= args.time_every <= 65536:
        raise Fail(f"--time-every must be from 1 to 65536, not {args.time_every}")
    if args.lock is not None or args.config is not None:
        algos = {a["name"]: a for a in list_cmd.algorithms(env)}
    if args.lock is not None:
        problem = lock_wait_problem(algos, args.lock, args.wait)
        if problem:
            raise Fail(problem)
    if args.config is not None:
        problem = _siteconfig.validate(args.config, algos, os.path.join(env.bindir, "liblock-config-check"))
        if problem:
            raise Fail(problem)
    for opt in ("json", "advise"):
        if getattr(args, opt):
            setattr(args, opt, _writable(getattr(args, opt), "--" + opt))
    if args.plot:
        args.plot = _check_plot(args.plot)
    try:
        th, src = _profadvice.load_thresholds(args.thresholds)
    except _profadvice.ThresholdError as e:
        raise Fail(f"thresholds: {e}")
    if args.dump and cmd:
        raise Fail("give either --dump RAW or a program, not both")
    if args.dump and (args.lock or args.config or args.only or args.time_every is not None):
        raise Fail("--lock, --config, --only and --time-every apply to a program run, not to --dump")
    return th, src


def _calibrate(args, env, cmd):
    if cmd:
        raise Fail("--calibrate runs lockbench: give no program")
    if args.reps < 1 or args.duration <= 0:
        raise Fail("--reps must be >= 1 and --duration > 0")
    out = _writable(args.thresholds, "--thresholds") if args.thresholds else _profadvice.cache_path()
    th = _profcalib.calibrate(env, args)
    rows = th.pop("_rows")
    path = _profadvice.store_thresholds(th, out)
    _runner.write_csv(path + ".runs.csv", rows, ["rep", "algorithm", "delay_cycles", "workers", "status", "check",
                                                 "lat_cycles_mean", "probe_ns", "probe_agree", "regime"])
    for line in _profcalib.describe(th):
        print(line, file=sys.stderr)
    print(f"thresholds stored in {path} (every run in {path}.runs.csv)", file=sys.stderr)
    return 0


def _find_program(prog):
    path = prog if os.sep in prog else shutil.which(prog)
    if not path or not os.path.exists(path):
        raise Fail(f"program not found: {prog}", 127)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise Fail(f"program is not executable: {prog}", 126)
    return path


def _child_env(args, env, out):
    lib = env.lib("liblock-profile.so")
    if not os.path.exists(lib):
        raise Fail(f"{lib} is missing (run `make` first)")
    ce = dict(os.environ)
    pre = ce.get("LD_PRELOAD", "")
    ce["LD_PRELOAD"] = lib + (" " + pre if pre else "")
    ce["LIBLOCK_PROFILE_OUT"] = out
    for var, val in (("LIBLOCK_LOCK", args.lock), ("LIBLOCK_WAIT", args.wait),
                     ("LIBLOCK_CONFIG", os.path.abspath(args.config) if args.config else None),
                     ("LIBLOCK_PROFILE_ONLY", args.only),
                     ("LIBLOCK_PROFILE_TIME_EVERY", None if args.time_every is None else str(args.time_every))):
        if val is None:
            ce.pop(var, None)
        else:
            ce[var] = val
    if args.lock or args.config:
        ce["LIBLOCK_STRICT"] = "1"
    # auto's switches, for the report (a log the user named is read, not replaced)
    if not ce.get("LIBLOCK_AUTO_LOG"):
        ce["LIBLOCK_AUTO_LOG"] = os.path.join(os.path.dirname(out), "auto.log")
    if args.lock == "auto":
        note = _autochoice.auto_env(ce, lambda: _profadvice.load_thresholds(args.thresholds))
        if note:
            print(note.replace("liblock run:", f"{PROG}:", 1), file=sys.stderr)
    return ce


def _run_program(path, cmd, child_env, on_snapshot):
    """Run the program in the foreground; return its wait status as
    (exit status or None, signal or None).  Like system(), we ignore the
    terminal's SIGINT/SIGQUIT while it runs (the program gets them and its
    runtime writes the report); SIGTERM/SIGHUP/SIGUSR1 sent to us are passed
    on to it (SIGUSR1: the runtime writes a snapshot, which we print)."""
    sys.stdout.flush()
    sys.stderr.flush()
    old = {}
    pending = []
    child = []

    def forward(sig, _frame):
        if not child:
            pending.append(sig)  # the program is not started yet: pass it on once it is
            return
        try:
            child[0].send_signal(sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGUSR1:
            usr1.append(1)
    usr1 = []
    for s in (signal.SIGINT, signal.SIGQUIT):
        old[s] = signal.signal(s, signal.SIG_IGN)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
        old[s] = signal.signal(s, forward)

    def child_signals():  # in the child before exec: the terminal's signals are the program's
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    try:
        p = subprocess.Popen([path] + cmd[1:], executable=path, env=child_env, preexec_fn=child_signals)
    except OSError as e:
        for s, h in old.items():
            signal.signal(s, h)
        raise Fail(f"cannot run {cmd[0]}: {e.strerror}", 126)
    child.append(p)
    for sig in pending:
        forward(sig, None)
    try:
        while True:
            try:
                rc = p.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                on_snapshot()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    on_snapshot()
    return (None, -rc) if rc < 0 else (rc, None)


def _aggregate(raw, th, src, algos):
    rep = _profdata.aggregate(raw)
    _profadvice.advise_all(rep, th, algos)
    rep["thresholds"] = {"lower": th["lower"], "upper": th.get("upper"), "source": src,
                         "date_utc": th.get("date_utc"), "best_local": th.get("best_local"),
                         "best_oversubscribed": th.get("best_oversubscribed")}
    return rep


def _report(raw, args, th, src, algos, title=None, outputs=True, children=(), auto=None):
    """Print the report of a raw dump and write the outputs.  children: raw
    dumps of the other processes that ran with the runtime (forked children
    and programs they started: PATH.PID), reported after it, kept in the JSON
    as `children` and advised in the same configuration file.  auto:
    (switches read from LIBLOCK_AUTO_LOG, the run's start on CLOCK_MONOTONIC),
    put on the lock sites they name."""
    def aggregate(r):
        rp = _aggregate(r, th, src, algos)
        if auto:
            lost = _profauto.attach(rp, auto[0], auto[1])
            if lost:
                rp["auto_unattributed"] = lost
        return rp
    rep = aggregate(raw)
    for line in _profreport.text_report(rep, args.top, src, th, title):
        print(line, file=sys.stderr)
    kids = []
    for craw in children:
        crep = aggregate(craw)
        for line in _profreport.text_report(crep, args.top, src, th, f"(child process {crep.get('pid')})"):
            print(line, file=sys.stderr)
        kids.append(crep)
    if kids:
        rep["children"] = kids
    if not outputs:
        return rep
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=1)
            f.write("\n")
        print(f"{PROG}: JSON report in {args.json}", file=sys.stderr)
    if args.advise:
        entries, seen = [], set()
        for r in [rep] + kids:
            for e in _profadvice.config_entries(r):
                if e[1] not in seen:  # a site the child inherited from the parent: advised once
                    seen.add(e[1])
                    entries.append(e)
        header = [f"liblock profile --advise for: {' '.join(rep.get('argv') or [rep.get('program') or '?'])}",
                  f"apply with: liblock run --config {os.path.basename(args.advise)} -- PROGRAM ARGS",
                  f"thresholds: lower {_profadvice.pct(th['lower'])}, upper {_profadvice.pct(th['upper']) if th.get('upper') is not None else 'none'} ({src})",
                  "every lock not named here keeps glibc's mutex" +
                  ("" if entries else "; no lock's advice was to change, so this file changes nothing")]
        _siteconfig.write(args.advise, header, entries)
        print(f"{PROG}: configuration for {len(entries)} lock site(s) in {args.advise}", file=sys.stderr)
    if args.plot:
        _profreport.plot(rep, args.plot, args.top)
        print(f"{PROG}: plot in {args.plot}", file=sys.stderr)
    return rep


def run(args, env):
    cmd = list(args.program)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    try:
        if args.calibrate:
            return _calibrate(args, env, cmd)
        if not cmd and not args.dump:
            raise Fail(f"no program given (usage: {USAGE})")
        th, src = _check_options(args, env, cmd)
        algos = None
        try:
            algos = {a["name"]: a for a in list_cmd.algorithms(env)}
        except (SystemExit, OSError, subprocess.SubprocessError):
            pass  # advice then names its defaults unchecked
        if args.dump:
            try:
                raw = _profdata.load(args.dump)
            except OSError as e:
                raise Fail(f"--dump {args.dump}: {e.strerror}")
            except _profdata.DumpError as e:
                raise Fail(f"--dump {e}")
            _report(raw, args, th, src, algos)
            return 0
        path = _find_program(cmd[0])
        tmp = tempfile.mkdtemp(prefix="liblock-profile-")
        out = os.path.join(tmp, "profile.json")
        try:
            child_env = _child_env(args, env, out)
            seen = set()

            def snapshots():
                for name in sorted(os.listdir(tmp)):
                    if name.startswith("profile.json.usr1.") and name[-1].isdigit() and name not in seen:
                        seen.add(name)
                        try:
                            _report(_profdata.load(os.path.join(tmp, name)), args, th, src, algos,
                                    title=f"snapshot {name.rsplit('.', 1)[1]}", outputs=False)
                        except (OSError, _profdata.DumpError) as e:
                            print(f"{PROG}: snapshot {name}: {e}", file=sys.stderr)
            t0 = time.monotonic_ns()  # CLOCK_MONOTONIC, as auto's log
            status, sig = _run_program(path, cmd, child_env, snapshots)
            code = status if sig is None else 128 + sig
            if not os.path.exists(out):
                why = (f"the program was killed by signal {sig} ({signal.Signals(sig).name}), which the runtime "
                       f"could not catch" if sig else "the program ended without writing one (did it exec another "
                       "program, or clear LD_PRELOAD?)")
                print(f"{PROG}: no profile was written: {why}", file=sys.stderr)
                return code
            try:
                raw = _profdata.load(out)
            except (OSError, _profdata.DumpError) as e:
                print(f"{PROG}: the profile written by the runtime is unusable: {e}", file=sys.stderr)
                return code if code else 1
            children = []
            for name in sorted(os.listdir(tmp)):
                if re.fullmatch(r"profile\.json\.\d+", name):
                    try:
                        children.append(_profdata.load(os.path.join(tmp, name)))
                    except (OSError, _profdata.DumpError) as e:
                        print(f"{PROG}: the profile of child process {name.rsplit('.', 1)[1]} is unusable: {e}",
                              file=sys.stderr)
            switches = [sw for sw in _profauto.read_log(child_env["LIBLOCK_AUTO_LOG"])[0] if sw["t_ns"] >= t0]
            try:
                _report(raw, args, th, src, algos, children=children,
                        auto=(switches, t0) if switches else None)
            except OSError as e:  # checked before the run; the disk or directory changed since
                print(f"{PROG}: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
                return code if code else 1
            return code
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except Fail as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return e.status
