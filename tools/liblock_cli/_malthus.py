"""`liblock bench malthus`: the Malthusian-locks paper's measurements
(docs/malthusian-bench.md); `liblock malthus` is the same command (malthus.py).

  liblock bench malthus table   Figure 4: one workload (RandArray) at 32 threads for several
                          lock/policy combinations, interleaved (A B C ... A B C ...), >= 5
                          repetitions; medians with min/max of throughput, average LWSS, MTTR,
                          Gini, RSTDDEV, voluntary context switches, CPU utilisation.
  liblock bench malthus sweep   Figure 3: throughput from 1 to 256 threads, interleaved, as CSV and a
                          PNG plot.

Each run is one `malthus` process (bench/malthus/) whose JSON record, with its ping-pong probe
before and after, is kept in a raw CSV under results/; the summary CSV and the plot are computed
from it. Combinations are NAME[:POLICY]; by default the paper's set (mcs spin and
spin-then-park, mcscr spin and spin-then-park, lifocr, loiter, posix), leaving out algorithms
that are not built. Numbers from this 2-CPU machine are noisy: compare ratios within one run.
"""
import csv
import json
import os
import statistics
import subprocess
import sys
import time

HELP = "the Malthusian-locks workloads: Figure 4 table and thread sweep (RandArray etc.)"

DEFAULT_COMBOS = ["mcs:spin", "mcs:spin-then-park", "mcscr:spin", "mcscr:spin-then-park", "lifocr", "loiter", "posix"]
WORKLOADS = ["randarray", "ringwalker", "producer-consumer", "keymap", "lrucache", "bufferpool"]
SUMMARY_METRICS = ["throughput", "avg_lwss", "mttr", "gini", "rstddev", "vcsw", "cpu_util", "acq_per_op"]


def add_arguments(p):
    sub = p.add_subparsers(dest="mode", metavar="MODE")
    for mode, helptext, threads, reps, dur in [
            ("table", "Figure 4 table: one thread count, several locks", "32", 5, 2.0),
            ("sweep", "throughput over thread counts, with a PNG plot", "1,2,4,8,16,32,64,128,256", 3, 1.0)]:
        q = sub.add_parser(mode, help=helptext, description=helptext)
        q.add_argument("--locks", default=None,
                       help="comma-separated NAME[:POLICY] (default: %s; 'all' = every algorithm and policy)"
                       % ",".join(DEFAULT_COMBOS))
        q.add_argument("--workload", "-w", default="randarray", choices=WORKLOADS)
        q.add_argument("--threads", "-t", default=threads, help=f"thread count(s), comma-separated (default {threads})")
        q.add_argument("--reps", "-r", type=int, default=reps, help=f"repetitions of each run (default {reps})")
        q.add_argument("--duration", "-d", type=float, default=dur, help=f"seconds per run (default {dur})")
        q.add_argument("--grace", type=float, default=5.0, help="seconds a run may take to stop (default 5)")
        q.add_argument("--ref", default=None, help="combination the ratios are taken against (default posix, else the first)")
        q.add_argument("--out", default=None, help="results directory (default results/)")
        q.add_argument("--tag", default=None, help="name stem of the output files")
        q.add_argument("--no-fairness", action="store_true", help="run without the fairness instrumentation")
        q.add_argument("--extra", default="", help="extra malthus options, e.g. '--keys 1000000'")
        if mode == "sweep":
            q.add_argument("--no-plot", action="store_true", help="CSV only")


def fail(msg):
    print(f"liblock bench malthus: {msg}", file=sys.stderr)
    return 2


def registry(env):
    out = subprocess.run([env.program("liblock-info")], check=True, capture_output=True, text=True).stdout
    return {a["name"]: a for a in (json.loads(l) for l in out.splitlines() if l.strip())}


def parse_combos(spec, reg):
    """[(label, lock, policy-or-None)], [skipped labels]; raises ValueError on bad input."""
    combos, skipped = [], []
    if spec == "all":
        for name, a in reg.items():
            if "delegates" in a.get("properties", []):
                continue
            for pol in a["policies"]:
                combos.append((f"{name}:{pol}", name, pol))
        return combos, skipped
    items = DEFAULT_COMBOS if spec is None else [s.strip() for s in spec.split(",") if s.strip()]
    if not items:
        raise ValueError("--locks is empty")
    for item in items:
        name, _, pol = item.partition(":")
        if name not in reg:
            if spec is None:
                skipped.append(item)
                continue
            raise ValueError(f"unknown lock '{name}' (liblock list shows them)")
        if pol and pol not in reg[name]["policies"] and not (pol == "stp" and "spin-then-park" in reg[name]["policies"]):
            raise ValueError(f"lock '{name}' has no waiting policy '{pol}' (it has {', '.join(reg[name]['policies'])})")
        combos.append((item, name, pol or None))
    return combos, skipped


def parse_threads(spec):
    try:
        ts = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--threads wants comma-separated integers, not '{spec}'")
    if not ts or any(t < 1 or t > 4096 for t in ts):
        raise ValueError("--threads wants thread counts in 1..4096")
    return ts


def run_one(env, args, lock, pol, threads):
    cmd = [env.program("malthus"), "-w", args.workload, "-l", lock, "-t", str(threads), "-d", str(args.duration),
           "-g", str(args.grace), "-o", "json"]
    if pol:
        cmd += ["-p", pol]
    if args.no_fairness:
        cmd += ["-F", "0"]
    cmd += args.extra.split()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + args.grace + 300)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    if p.returncode == 3:
        return None, "unsupported: " + p.stderr.strip()
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    if not lines:
        return None, f"exit {p.returncode}: {p.stderr.strip()}"
    rec = json.loads(lines[-1])
    if p.returncode != 0:
        rec["error"] = p.stderr.strip()
    return rec, None


def med(vals):
    vals = [v for v in vals if isinstance(v, (int, float))]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


def fmt(x, nd=1):
    if x is None:
        return "-"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.2f}M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:.1f}K"
    return f"{x:.{nd}f}"


def write_csv(path, rows):
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})


def summarise(records, combos, threads_list, ref_label):
    """One summary row per (combination, thread count)."""
    out = []
    for t in threads_list:
        ref_tp = None
        for label, _, _ in combos:
            rs = [r for r in records if r["_label"] == label and r["threads"] == t]
            if label == ref_label and rs:
                ref_tp = med([r["throughput"] for r in rs])[0]
        for label, lock, _ in combos:
            rs = [r for r in records if r["_label"] == label and r["threads"] == t]
            if not rs:
                continue
            row = {"workload": rs[0]["workload"], "combo": label, "lock": lock, "policy": rs[0]["policy"],
                   "threads": t, "runs": len(rs), "undrained": sum(1 for r in rs if not r.get("drained"))}
            for m in SUMMARY_METRICS:
                md, lo, hi = med([r.get(m) for r in rs])
                row[f"{m}_median"], row[f"{m}_min"], row[f"{m}_max"] = md, lo, hi
            row["ratio_vs_ref"] = (row["throughput_median"] / ref_tp) if ref_tp else None
            row["ref"] = ref_label
            probes = [r.get(k) for r in rs for k in ("probe_before_ns", "probe_after_ns")]
            row["probe_min_ns"], row["probe_max_ns"] = med(probes)[1:]
            out.append(row)
    return out


def print_table(rows):
    hdr = ["combo", "threads", "throughput (min-max)", "vs ref", "avg LWSS", "MTTR", "Gini", "RSTDDEV", "vol. csw",
           "CPU util", "acq/op"]
    lines = [hdr]
    for r in rows:
        lines.append([r["combo"], str(r["threads"]),
                      f"{fmt(r['throughput_median'])} ({fmt(r['throughput_min'])}-{fmt(r['throughput_max'])})",
                      f"{r['ratio_vs_ref']:.2f}x" if r["ratio_vs_ref"] else "-",
                      fmt(r["avg_lwss_median"]), fmt(r["mttr_median"]), fmt(r["gini_median"], 3),
                      fmt(r["rstddev_median"], 3), fmt(r["vcsw_median"], 0), fmt(r["cpu_util_median"], 2) + "x",
                      fmt(r["acq_per_op_median"], 2)])
    widths = [max(len(l[i]) for l in lines) for i in range(len(hdr))]
    for i, l in enumerate(lines):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(l, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def print_matrix(rows, combos, threads_list):
    """Sweep: median throughput, one row per thread count, one column per combination."""
    labels = [c[0] for c in combos if any(r["combo"] == c[0] for r in rows)]
    lines = [["threads"] + labels]
    for t in threads_list:
        line = [str(t)]
        for lab in labels:
            r = next((r for r in rows if r["combo"] == lab and r["threads"] == t), None)
            line.append(fmt(r["throughput_median"]) if r else "-")
        lines.append(line)
    widths = [max(len(l[i]) for l in lines) for i in range(len(lines[0]))]
    for i, l in enumerate(lines):
        print("| " + " | ".join(c.rjust(w) for c, w in zip(l, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")


def plot(path, rows, combos, workload):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, _, _ in combos:
        rs = sorted((r for r in rows if r["combo"] == label and r["throughput_median"]), key=lambda r: r["threads"])
        if not rs:
            continue
        x = [r["threads"] for r in rs]
        y = [r["throughput_median"] for r in rs]
        lo = [r["throughput_median"] - r["throughput_min"] for r in rs]
        hi = [r["throughput_max"] - r["throughput_median"] for r in rs]
        ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("threads")
    ax.set_ylabel("throughput (operations/s, median; bars min-max)")
    ax.set_title(f"{workload}: throughput vs threads (this machine, noisy)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args, env):
    if not args.mode:
        return fail("choose a mode: table or sweep (liblock bench malthus -h)")
    if args.reps < 1 or args.duration <= 0 or args.grace < 0:
        return fail("--reps must be >= 1, --duration > 0 and --grace >= 0")
    try:
        reg = registry(env)
        combos, skipped = parse_combos(args.locks, reg)
        threads_list = parse_threads(args.threads)
    except ValueError as e:
        return fail(str(e))
    if not combos:
        return fail("no lock/policy combination to run")
    for s in skipped:
        print(f"liblock bench malthus: {s} is not built; left out", file=sys.stderr)
    labels = [c[0] for c in combos]
    ref = args.ref or ("posix" if "posix" in labels else labels[0])
    if ref not in labels:
        return fail(f"--ref {ref} is not among the combinations ({', '.join(labels)})")
    outdir = args.out or env.results
    os.makedirs(outdir, exist_ok=True)
    stem = args.tag or f"malthus-{args.mode}-{args.workload}-{time.strftime('%Y%m%d-%H%M%S')}"

    records, unsupported = [], set()
    total = args.reps * len(threads_list) * len(combos)
    n = 0
    for rep in range(args.reps):           # interleaved: A B C ... A B C ...
        for t in threads_list:
            for label, lock, pol in combos:
                n += 1
                if label in unsupported:
                    continue
                rec, err = run_one(env, args, lock, pol, t)
                if err:
                    print(f"[{n}/{total}] {label} t={t}: {err}", file=sys.stderr)
                    if err.startswith("unsupported"):
                        unsupported.add(label)
                    continue
                rec["_label"], rec["rep"] = label, rep
                records.append(rec)
                print(f"[{n}/{total}] {label:<24} t={t:<4} {fmt(rec['throughput']):>8} ops/s  "
                      f"lwss {fmt(rec.get('avg_lwss'))}  probe {fmt(rec.get('probe_before_ns'))}/"
                      f"{fmt(rec.get('probe_after_ns'))} ns", file=sys.stderr)
    if not records:
        return fail("no run succeeded")
    raw = os.path.join(outdir, stem + "-raw.csv")
    write_csv(raw, [{("combo" if k == "_label" else k): v for k, v in r.items()} for r in records])
    rows = summarise(records, combos, threads_list, ref)
    summ = os.path.join(outdir, stem + "-summary.csv")
    write_csv(summ, rows)
    print(f"{args.workload}, {args.reps} interleaved repetitions of {args.duration:g} s; medians (min-max); "
          f"ratios vs {ref}; probe {fmt(min(r['probe_min_ns'] or 0 for r in rows))}-"
          f"{fmt(max(r['probe_max_ns'] or 0 for r in rows))} ns")
    print_table(rows)
    if args.mode == "sweep":
        print("\nmedian throughput (operations/s):")
        print_matrix(rows, combos, threads_list)
    print(f"raw runs: {raw}\nsummary:  {summ}")
    if args.mode == "sweep" and not args.no_plot:
        png = os.path.join(outdir, stem + ".png")
        plot(png, rows, combos, args.workload)
        print(f"plot:     {png}")
    bad = [r for r in records if r.get("check") == "failed"]
    if bad:
        print(f"liblock bench malthus: {len(bad)} run(s) failed their consistency check", file=sys.stderr)
        return 1
    return 0
