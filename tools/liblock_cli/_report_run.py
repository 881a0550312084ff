"""`liblock bench report` without directories: regenerate BENCHMARKS.md.

For each section of _report_sections.py (all, or --only ones): run its
benchmark commands with their raw output in RESULTS/SECTION/ (default
build/results, outside the tracked tree), reduce the raw results to
bench/report/SECTION.csv with the run's metadata (commit, machine, date,
probe regimes, command, duration), then render BENCHMARKS.md from
bench/report/BENCHMARKS.md.in and every section CSV (_report_render.py).
--from-csv renders from the CSVs alone.  A section that fails leaves its
old CSV in place and the command exits non-zero after the others ran; a
report is written only once every section it names has a CSV and the
whole text rendered (to a temporary file, then renamed)."""
import datetime
import os
import platform
import shutil
import subprocess
import sys
import time

from . import _report_csv
from . import _report_render
from . import _report_sections
from . import _runner
from ._report_csv import ReportError


def add_arguments(sp):
    sp.add_argument("--results", metavar="DIR", help="raw results directory, one subdirectory per section "
                    "(default build/results; LIBLOCK_BUILD's results when set)")
    sp.add_argument("--from-csv", action="store_true", help="run nothing: render BENCHMARKS.md from bench/report/*.csv")
    sp.add_argument("--only", metavar="SECTION[,SECTION]", default="",
                    help="rerun only these sections (the others keep their CSVs); see --list")
    sp.add_argument("--quick", action="store_true", help="a short smoke run of every section (a few minutes; the "
                    "report says so in every section)")
    sp.add_argument("--skip", metavar="SECTION[,SECTION]", default="", help="run every section but these")
    sp.add_argument("--list", action="store_true", help="list the sections and their commands, run nothing")
    sp.add_argument("--csv-dir", metavar="DIR", help="where the section CSVs live (default bench/report)")
    sp.add_argument("--template", metavar="FILE", help="the report's template (default bench/report/BENCHMARKS.md.in)")
    sp.add_argument("--output", metavar="FILE", help="the report (default BENCHMARKS.md)")


def _paths(args, env):
    root = env.root or os.getcwd()
    csv_dir = args.csv_dir or os.path.join(root, "bench", "report")
    template = args.template or os.path.join(root, "bench", "report", "BENCHMARKS.md.in")
    output = args.output or os.path.join(root, "BENCHMARKS.md")
    results = args.results or os.path.join(os.path.dirname(env.libdir), "results")
    return csv_dir, template, output, results


def _names(text, known):
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in known]
    if bad:
        raise ReportError(f"unknown section(s): {', '.join(bad)} (sections: {', '.join(known)})")
    return names


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    rt = ""
    try:
        with open("/proc/sys/kernel/sched_rt_runtime_us") as f:
            # the kernel's budget for real-time threads: what an RCL server may lose each second
            # (docs/rcl.md, "The kernel's share for other tasks")
            rt = f", sched_rt_runtime_us {f.read().strip()}"
    except OSError:
        pass
    return f"{model or platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}{rt}"


def commit(root):
    def git(*a):
        return subprocess.run(["git", "-C", root] + list(a), capture_output=True, text=True, timeout=20)
    try:
        h = git("rev-parse", "--short", "HEAD").stdout.strip()
        if not h:
            return "unknown"
        # changes to tracked files outside the report's own outputs make the build differ from the commit
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/report",
                    ":!BENCHMARKS.md").stdout.strip()
        return h + ("+changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def regimes(before, after, out):
    """The probe regimes of a section's run: the ping-pong probe taken just
    before and just after it, and the regimes of its runs where the raw
    results record one per run."""
    parts = []
    for label, p in (("before", before), ("after", after)):
        v = _report_sections._f(p.get("probe_ns"))
        if v:
            parts.append(f"{label} {v:.0f} ns ({_runner.regime_of(v)})")
    counts = {}
    for dirpath, _, files in os.walk(out):
        for fn in files:
            if fn == "runs.csv" or fn.endswith("-raw.csv"):
                for r in _report_sections._read_csv(os.path.join(dirpath, fn)):
                    g = r.get("regime")
                    for k in ("probe_ns", "probe_before_ns"):  # runs that record a probe but no regime
                        if not g and _report_sections._f(r.get(k)):
                            g = _runner.regime_of(_report_sections._f(r.get(k)))
                    if g:
                        counts[g] = counts.get(g, 0) + 1
    text = "ping-pong probe " + ", ".join(parts) if parts else "no probe"
    if counts:
        text += "; runs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    return text


def run_section(sec, env, reg, results, csv_dir, quick, root, rev):
    out = os.path.join(results, sec.name)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    why = sec.needs(env) if sec.needs else None
    if why:
        raise _report_sections.SectionError(f"{sec.name}: cannot run here: {why}")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    before = _runner.probes(env)
    t0 = time.time()
    shown = []
    for i, argv in enumerate(sec.commands(quick)):
        if callable(argv[0]):
            shown.append(f"tools/liblock bench report --only {sec.name}")
            argv[0](env, out, quick)
            continue
        cmd = _report_sections.expand(argv, env, out, reg)
        shown.append(_report_sections.display(argv))
        log = os.path.join(out, f"{os.path.basename(cmd[0] if not argv[0] == '{liblock}' else 'liblock')}-{i}.log")
        with open(log, "w") as f:
            e = dict(os.environ, LIBLOCK_BUILD=os.path.dirname(env.libdir))
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=e, cwd=root)
        if p.returncode != 0:
            with open(log) as f:
                tail = f.read().strip().splitlines()[-3:]
            raise _report_sections.SectionError(f"{sec.name}: `{' '.join(cmd)}` exited {p.returncode}: "
                                                + " / ".join(tail))
    took = time.time() - t0
    after = _runner.probes(env)
    fields, rows = sec.reduce(out, reg)
    meta = {"section": sec.name, "commit": rev, "machine": machine(), "date_utc": date,
            "regimes": regimes(before, after, out), "command": "; ".join(dict.fromkeys(shown)),
            "duration_s": f"{took:.0f}", "quick": "1" if quick else "0"}
    _report_csv.write(os.path.join(csv_dir, sec.name + ".csv"), meta, fields, rows)
    return took


def run(args, env):
    known = _report_sections.by_name()
    csv_dir, template, output, results = _paths(args, env)
    try:
        if args.list:
            for s in known.values():
                cmds = "; ".join(_report_sections.display(a) if not callable(a[0]) else "(built in)"
                                 for a in s.full)
                print(f"{s.name:<18} {s.title}: {cmds}")
            return 0
        only = _names(args.only, known)
        skip = _names(args.skip, known)
        if args.from_csv and (only or skip or args.quick):
            raise ReportError("--from-csv runs nothing: it takes no --only, --skip or --quick")
        failed = []
        if not args.from_csv:
            from ._lockexp import registry
            reg = registry(env)
            todo = [s for s in known.values() if (not only or s.name in only) and s.name not in skip]
            total0 = time.time()
            root = env.root or os.getcwd()
            rev = commit(root)  # the tree the build came from, taken before anything runs
            print(f"liblock bench report: {len(todo)} section(s){' (quick)' if args.quick else ''}; raw results in "
                  f"{results}, CSVs in {csv_dir}", file=sys.stderr)
            for s in todo:
                print(f"  {s.name} ...", file=sys.stderr, flush=True)
                try:
                    took = run_section(s, env, reg, results, csv_dir, args.quick, root, rev)
                    print(f"  {s.name}: {took:.0f} s", file=sys.stderr, flush=True)
                except (_report_sections.SectionError, OSError, ValueError, KeyError, subprocess.SubprocessError,
                        SystemExit) as e:  # SystemExit: a program of the build is missing (Env.program)
                    failed.append(s.name)
                    print(f"  {s.name}: FAILED: {e} (its old CSV, if any, is kept)", file=sys.stderr, flush=True)
            print(f"liblock bench report: sections ran in {(time.time() - total0) / 60:.1f} min", file=sys.stderr)
        _report_render.render_file(template, csv_dir, output, sections=known)
        print(f"liblock bench report: wrote {output}", file=sys.stderr)
        if failed:
            print(f"liblock bench report: {len(failed)} section(s) failed: {', '.join(failed)}", file=sys.stderr)
            return 1
        return 0
    except ReportError as e:
        print(f"liblock bench report: {e}; {output} not written", file=sys.stderr)
        return 2
