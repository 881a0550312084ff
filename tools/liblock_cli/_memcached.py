"""`liblock bench apps memcached` (`make memcached-rcl`): the real-code
acceptance of `liblock transform` (docs/memcached.md).

  1. fetch memcached's Debian source package (`apt-get source memcached`,
     cached under BUILD/apps/memcached/src; scripts/deps.sh adds the deb-src
     line when it is missing);
  2. pick the critical sections: the call sites of the top locks of a
     profiler JSON (`--profile`, the shape of `liblock profile`: locks[]
     .call_sites[].site = "file.c:LINE"); default bench/memcached/hot-sites.json;
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
import shutil
import subprocess
import sys
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


def workdir(env, given):
    d = given or os.path.join(os.path.dirname(env.libdir), "apps", "memcached")
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


def hot_sites(profile, top):
    """Call sites of the `top` locks with the most time in critical sections
    (or the most acquisitions) of a profiler JSON."""
    try:
        with open(profile) as f:
            data = json.load(f)
        locks = data["locks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"liblock bench apps memcached: {profile}: not a profiler JSON with locks[] ({e})")

    def weight(lk):
        for k in ("cs_time_fraction", "cs_ns", "hold_ns", "acquisitions", "locks"):
            v = lk.get(k)
            if isinstance(v, (int, float)):
                return v
        return 0
    ranked = sorted(locks, key=weight, reverse=True)[:top] if top > 0 else locks
    sites = []
    for lk in ranked:
        for cs in lk.get("call_sites", []):
            s = cs.get("site") if isinstance(cs, dict) else None
            if isinstance(s, str) and ":" in s and s not in sites:
                sites.append(s)
    if not sites:
        which = f"its top {top} locks" if top > 0 else "its locks"
        raise SystemExit(f"liblock bench apps memcached: {profile}: no call_sites[].site in {which}")
    return sites


def configure_build(tree, logf, liblock_libdir=None, include=None):
    """./configure (once) and build memcached, memcached-debug, sizes, testapp."""
    if not os.path.exists(os.path.join(tree, "Makefile")):
        cmd = ["./configure", "--disable-dependency-tracking"]
        if liblock_libdir:
            cmd += [f"CPPFLAGS=-I{include}",
                    f"LIBS=-L{liblock_libdir} -Wl,-rpath,{liblock_libdir} -llock"]
        sh(cmd, tree, logf)
    sh(["make", "-j2", "memcached", "memcached-debug", "sizes", "testapp", "timedrun"], tree, logf)


def prepare(args, env):
    """Both trees built; returns (wd, orig, tr, transform report)."""
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
    sites = hot_sites(args.profile, args.top_locks)
    stamp = json.dumps({"sites": sites, "wrappers": WRAPPERS, "flags": TRANSFORM_FLAGS}, sort_keys=True)
    stampf = os.path.join(tr, ".liblock-transform")
    if args.rebuild or not (os.path.exists(stampf) and open(stampf).read() == stamp
            and os.path.exists(os.path.join(tr, "memcached-debug.bin"))):
        shutil.rmtree(tr, ignore_errors=True)
        shutil.copytree(src, tr, symlinks=True)
        # config.h is needed to parse the files as they are built
        if not os.path.exists(os.path.join(orig, "config.h")):
            raise SystemExit(f"liblock bench apps memcached: {orig}/config.h missing")
        shutil.copy(os.path.join(orig, "config.h"), os.path.join(tr, "config.h"))
        files = sorted({s.rpartition(":")[0] for s in sites} | {"thread.c"})
        log(f"transforming {len(sites)} sites in {', '.join(files)}")
        tool = os.path.join(env.root or "", "tools", "liblock")
        # (--only and --wrapper take lists: --report ends them before the files)
        cmd = [sys.executable, tool, "transform", "--in-place", "--only", *sites, "--wrapper", *WRAPPERS,
               "--report", "transform-report.json", *files, "--", *TRANSFORM_FLAGS]
        r = subprocess.run(cmd, cwd=tr, capture_output=True, text=True)
        with open(os.path.join(wd, "transform.log"), "w") as f:
            f.write(r.stderr)
        if r.returncode != 0:
            raise SystemExit(f"liblock bench apps memcached: liblock transform failed: {r.stderr.strip()[-400:]}")
        os.remove(os.path.join(tr, "config.h"))
        log(f"building transformed {version} in {tr}")
        configure_build(tr, logf, env.libdir, os.path.join(env.root or "", "include"))
        wrap_debug_binary(tr)
        with open(stampf, "w") as f:
            f.write(stamp)
    with open(os.path.join(tr, "transform-report.json")) as f:
        report = json.load(f)["sections"]
    return wd, orig, tr, report, version, sites


WRAPPER_SH = """#!/bin/sh
# memcached-debug, interposed when MC_LIBLOCK_LOCK is set (liblock bench apps memcached):
# only memcached runs under liblock, not the Perl test driver
[ -n "$MC_LIBLOCK_LOCK" ] || exec "$0.bin" "$@"
LD_PRELOAD=$MC_LIBLOCK_PRELOAD LIBLOCK_LOCK=$MC_LIBLOCK_LOCK LIBLOCK_STRICT=1 exec env ${MC_LIBLOCK_WAIT:+LIBLOCK_WAIT=$MC_LIBLOCK_WAIT} "$0.bin" "$@"
"""


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
