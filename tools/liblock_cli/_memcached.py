"""`liblock bench apps memcached` (`make memcached-rcl`): the real-code
acceptance of `liblock transform` (docs/memcached.md).

  1. fetch memcached's Debian source package (`apt-get source memcached`,
     cached under BUILD/apps/memcached/src; scripts/deps.sh adds the deb-src
     line when it is missing);
  2. pick the critical sections: run the untransformed memcached under
     `liblock profile --json` while memcslap runs Set and Get
     (_memcached_bench.profile_workload), or read a saved profile
     (`--profile`); the call sites (locks[].call_sites[].site =
     "file.c:LINE") of the top `--top-locks` locks by cs_share are mapped to
     sections by a dry run of `liblock transform --only` (a call site inside
     a --wrapper's body selects the wrapper's sections), minus LEAVE_OUT;
  3. transform them (`liblock transform --only SITES --wrapper ...`) into a
     copy of the source (tr/), report what was transformed and refused, build
     it against liblock.so, next to an untransformed build (orig/);
  4. run memcached's own test suite (sizes, testapp, prove t/*.t, one file at
     a time) on the untransformed build natively, then on the transformed
     build natively, under `--lock rcl` and `--lock mcs --wait
     spin-then-park`: every test that passed untransformed must pass;
  5. measure memcslap Get and Set throughput (_memcached_bench.py).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# Wrapper functions of memcached that lock a mutex computed from their
# arguments (thread.c): item_lock(hv) -> &item_locks[hv & hashmask(...)],
# STATS_LOCK() -> &stats_lock.
WRAPPERS = ["item_lock:item_unlock", "STATS_LOCK:STATS_UNLOCK"]
TRANSFORM_FLAGS = ["-DHAVE_CONFIG_H", "-I.", "-DNDEBUG", "-pthread"]


def log(msg):
    print(f"liblock bench apps memcached: {msg}", file=sys.stderr, flush=True)


def sh(cmd, cwd, logf, timeout=1800, env=None):
    with open(logf, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, env=env)
    if r.returncode != 0:
        raise SystemExit(f"liblock bench apps memcached: `{' '.join(cmd)}` failed in {cwd} (exit {r.returncode}; "
                         f"see {logf})")


def workdir(env, given, create=True):
    d = given or os.path.join(os.path.dirname(env.libdir), "apps", "memcached")
    if create:
        os.makedirs(d, exist_ok=True)
    return os.path.abspath(d)


def fetch(wd):
    """The unpacked source tree of Debian's memcached (downloaded once)."""
    src = os.path.join(wd, "src")
    trees = sorted(glob.glob(os.path.join(src, "memcached-*/")))
    if trees:
        return trees[-1].rstrip("/")
    if not shutil.which("apt-get") or not shutil.which("dpkg-source"):
        raise SystemExit("liblock bench apps memcached: apt-get and dpkg-source (dpkg-dev) are needed to fetch "
                         "memcached's source (scripts/deps.sh)")
    os.makedirs(src, exist_ok=True)
    log("fetching the source package (apt-get source memcached)")
    r = subprocess.run(["apt-get", "source", "-q", "memcached"], cwd=src, capture_output=True, text=True)
    trees = sorted(glob.glob(os.path.join(src, "memcached-*/")))
    if r.returncode != 0 or not trees:
        msg = (r.stderr.strip().splitlines() or ["no source tree"])[-1]
        raise SystemExit(f"liblock bench apps memcached: apt-get source memcached failed: {msg} (run "
                         f"scripts/deps.sh as root: it adds the deb-src line)")
    return trees[-1].rstrip("/")


# Sections the transform accepts but that run correctly delegated only with
# the caller's thread identity (LIBLOCK_IDENTITY=1, docs/internals.md): they
# reach memcached's per-thread logger through functions of other files, which
# the transform does not follow (docs/transform.md, "Things to know").
# Delegated without identity, memcached-debug crashed in t/chunked-items.t
# (GET_LOGGER() is NULL on a servicing thread).  With --identity on (the
# default) they are transformed and every interposed run sets
# LIBLOCK_IDENTITY=1; with --identity off they are left out.
LEAVE_OUT = {
    "store_item": "do_store_item may allocate an item; allocation may evict through lru_pull_tail, whose "
                  "LOGGER_LOG(NULL, ...) reads memcached's per-thread logger (pthread_getspecific), which an RCL "
                  "servicing thread does not have (other files: the transform cannot see it)",
    "add_delta": "do_add_delta may allocate an item (same path to lru_pull_tail's per-thread logger as store_item)",
}


def load_profile(profile):
    try:
        with open(profile) as f:
            data = json.load(f)
        locks = data["locks"]
        if not isinstance(locks, list):
            raise TypeError("locks is not a list")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"liblock bench apps memcached: {profile}: not a profiler JSON with locks[] ({e})")
    return data


def ranked_locks(data, top):
    """The `top` locks (all with top <= 0) of a `liblock profile --json`
    report, by share of thread time in their critical sections (cs_share, the
    profiler's ranking; ties: more acquisitions first).  A JSON without
    cs_share keeps its order."""
    def key(lk):
        share = lk.get("cs_share")
        acq = lk.get("acquisitions")
        return (-(share if isinstance(share, (int, float)) else 0),
                -(acq if isinstance(acq, (int, float)) else 0))
    locks = [lk for lk in data["locks"] if isinstance(lk, dict)]
    ranked = sorted(locks, key=key)  # stable: a JSON without numbers keeps its order
    return ranked[:top] if top > 0 else ranked


def hot_sites(profile, top):
    """Call sites (locks[].call_sites[].site, "file.c:LINE") of the `top`
    locks of a profiler JSON, in rank order, without repeats."""
    data = load_profile(profile)
    sites = []
    for lk in ranked_locks(data, top):
        for cs in lk.get("call_sites") or []:
            s = cs.get("site") if isinstance(cs, dict) else None
            if isinstance(s, str) and re.fullmatch(r"[^:+\s]+\.c:\d+", s) and s not in sites:
                sites.append(s)
    if not sites:
        which = f"its top {top} locks" if top > 0 else "its locks"
        raise SystemExit(f"liblock bench apps memcached: {profile}: no call_sites[].site FILE.c:LINE in {which}")
    return sites


def select_sections(sites, tree, wrappers, flags, leave_out, tool=None):
    """Map profiler call sites to the sections `liblock transform --only`
    takes, in the source tree `tree` (configured: config.h present).

    A call site names the caller of pthread_mutex_lock: a section's own lock
    line, or the lock call inside a --wrapper's body (item_lock's
    thread.c:122), which the transform expands to every section locked through
    that wrapper.  A dry run of the transform with --only SITES gives the
    sections selected; those the transform refuses, and those of functions in
    `leave_out` (with the reason), are not passed on.  Returns a dict: files (transformed), only (explicit FILE:LINE of
    each section to transform), sections (the dry run's selected entries),
    left_out [(entry, reason)] (the refused are the sections whose status is
    "refused"), unmatched [(site, source line)]: sites at no
    section's lock line (a trylock, a wrapper's body, a lock the transform
    does not see as a section), foreign: sites outside the tree's files."""
    files, foreign = [], []
    for s in sites:
        f = s.rpartition(":")[0]
        if os.path.isfile(os.path.join(tree, f)):
            if f not in files:
                files.append(f)
        else:
            foreign.append(s)
    # thread.c defines the wrappers: it is transformed in the same run (docs/transform.md)
    files = sorted(set(files) | ({"thread.c"} if os.path.isfile(os.path.join(tree, "thread.c")) else set()))
    tool = tool or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "liblock")
    fd, rep = tempfile.mkstemp(suffix=".json", prefix="liblock-select-")
    os.close(fd)
    try:
        cmd = [sys.executable, tool, "transform", "--only", *sites, "--wrapper", *wrappers,
               "--report", rep, *files, "--", *flags]
        r = subprocess.run(cmd, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode not in (0, 1):  # 1: some sections refused (reported), 2: an error
            raise SystemExit(f"liblock bench apps memcached: liblock transform (selection) failed: "
                             f"{r.stderr.strip()[-400:]}")
        with open(rep) as f:
            report = json.load(f)["sections"]
    finally:
        os.unlink(rep)
    chosen = [e for e in report if e.get("selected")]
    left = [(e, leave_out[e["function"]]) for e in chosen if e["function"] in leave_out]
    keep = [e for e in chosen if e["function"] not in leave_out and e["status"] != "refused"]
    lines = {e["site"] for e in chosen}
    unmatched = []
    for s in sites:
        if s in foreign or any(x == s or x.endswith("/" + s) for x in lines):
            continue
        f, _, ln = s.rpartition(":")
        try:
            with open(os.path.join(tree, f), errors="replace") as fh:
                text = fh.read().splitlines()[int(ln) - 1].strip()
        except (OSError, IndexError, ValueError):
            text = ""
        unmatched.append((s, text))
    return {"files": files, "only": [e["site"] for e in keep], "sections": chosen, "left_out": left,
            "unmatched": unmatched, "foreign": foreign}


def configure_build(tree, logf, liblock_libdir=None, include=None):
    """./configure (once) and build memcached, memcached-debug, sizes, testapp
    (make -j CPUS)."""
    if not os.path.exists(os.path.join(tree, "Makefile")):
        cmd = ["./configure", "--disable-dependency-tracking"]
        if liblock_libdir:
            cmd += [f"CPPFLAGS=-I{include}",
                    f"LIBS=-L{liblock_libdir} -Wl,-rpath,{liblock_libdir} -llock"]
        sh(cmd, tree, logf)
    sh(["make", f"-j{os.cpu_count() or 2}", "memcached", "memcached-debug", "sizes", "testapp", "timedrun"], tree, logf)


def built(wd):
    """Both trees of workdir wd built by prepare() (the transformed one with
    its stamp): prepare() then only selects the sections again (a dry run of
    the transform, a few seconds), and rebuilds nothing unless they changed."""
    return (os.path.exists(os.path.join(wd, "orig", "memcached"))
            and os.path.exists(os.path.join(wd, "tr", "memcached"))
            and os.path.exists(os.path.join(wd, "tr", ".liblock-transform"))
            and bool(glob.glob(os.path.join(wd, "src", "memcached-*/"))))


def prepare(args, env, d, profile_workload):
    """Both trees built; the profile taken (unless --profile names one) and
    the sections selected from it.  Returns (wd, orig, tr, transform report,
    version, sites, selection)."""
    wd = workdir(env, args.build_dir)
    src = fetch(wd)
    version = os.path.basename(src)
    logf = os.path.join(wd, "build.log")
    orig, tr = os.path.join(wd, "orig"), os.path.join(wd, "tr")
    if not os.path.exists(os.path.join(orig, "memcached-debug")):
        shutil.rmtree(orig, ignore_errors=True)
        shutil.copytree(src, orig, symlinks=True)
        log(f"building untransformed {version} in {orig}")
        configure_build(orig, logf)
    if not os.path.exists(os.path.join(orig, "config.h")):
        raise SystemExit(f"liblock bench apps memcached: {orig}/config.h missing")
    if not args.profile:
        args.profile = profile_workload(args, env, orig, d)
    sites = hot_sites(args.profile, args.top_locks)
    tool = os.path.join(env.root or "", "tools", "liblock")
    sel = select_sections(sites, orig, WRAPPERS, TRANSFORM_FLAGS, {} if identity_on(args) else LEAVE_OUT, tool)
    if not sel["only"]:
        raise SystemExit(f"liblock bench apps memcached: no section of memcached's files at the call sites of "
                         f"{args.profile}'s top locks ({', '.join(sites[:8])}...)")
    files = sel["files"]
    stamp = json.dumps({"only": sel["only"], "files": files, "wrappers": WRAPPERS, "flags": TRANSFORM_FLAGS,
                        "wrapper_sh": WRAPPER_SH}, sort_keys=True)
    stampf = os.path.join(tr, ".liblock-transform")
    if args.rebuild or not (os.path.exists(stampf) and open(stampf).read() == stamp
            and os.path.exists(os.path.join(tr, "memcached-debug.bin"))):
        shutil.rmtree(tr, ignore_errors=True)
        shutil.copytree(src, tr, symlinks=True)
        # config.h is needed to parse the files as they are built
        shutil.copy(os.path.join(orig, "config.h"), os.path.join(tr, "config.h"))
        log(f"transforming {len(sel['only'])} sections in {', '.join(files)}")
        # (--only and --wrapper take lists: --report ends them before the files)
        cmd = [sys.executable, tool, "transform", "--in-place", "--only", *sel["only"], "--wrapper", *WRAPPERS,
               "--report", "transform-report.json", *files, "--", *TRANSFORM_FLAGS]
        with open(os.path.join(wd, "transform.cmd"), "w") as f:
            f.write(" ".join(cmd[1:]) + "\n")
        r = subprocess.run(cmd, cwd=tr, capture_output=True, text=True)
        with open(os.path.join(wd, "transform.log"), "w") as f:
            f.write(r.stderr)
        if r.returncode not in (0, 1):  # 1: some sections refused (reported), 2: an error, nothing written
            raise SystemExit(f"liblock bench apps memcached: liblock transform failed: {r.stderr.strip()[-400:]}")
        os.remove(os.path.join(tr, "config.h"))
        log(f"building transformed {version} in {tr}")
        configure_build(tr, logf, env.libdir, os.path.join(env.root or "", "include"))
        wrap_debug_binary(tr)
        with open(stampf, "w") as f:
            f.write(stamp)
    with open(os.path.join(tr, "transform-report.json")) as f:
        report = json.load(f)["sections"]
    return wd, orig, tr, report, version, sites, sel


WRAPPER_SH = """#!/bin/sh
# memcached-debug, interposed when MC_LIBLOCK_LOCK is set (liblock bench apps memcached):
# only memcached runs under liblock, not the Perl test driver
[ -n "$MC_LIBLOCK_LOCK" ] || exec "$0.bin" "$@"
LD_PRELOAD=$MC_LIBLOCK_PRELOAD LIBLOCK_LOCK=$MC_LIBLOCK_LOCK LIBLOCK_STRICT=1 exec env ${MC_LIBLOCK_WAIT:+LIBLOCK_WAIT=$MC_LIBLOCK_WAIT} ${MC_LIBLOCK_IDENTITY:+LIBLOCK_IDENTITY=$MC_LIBLOCK_IDENTITY} "$0.bin" "$@"
"""


def identity_on(args):
    """--identity on (the default): delegated sections run with their caller's identity."""
    return getattr(args, "identity", "on") != "off"


def wrap_debug_binary(tree):
    b = os.path.join(tree, "memcached-debug")
    os.replace(b, b + ".bin")
    with open(b, "w") as f:
        f.write(WRAPPER_SH)
    os.chmod(b, 0o755)


def summarise_report(report, sites):
    n = {s: [e for e in report if e["status"] == s] for s in ("transformed", "refused", "nested", "skipped")}
    sel = [e for e in report if e["site"] in sites or any(e["site"].endswith(s) for s in sites)]
    return n, sel
