"""PNG plots of `liblock bench` results (matplotlib, Agg backend).  Every plot
states the probe regime its numbers come from and the number of runs."""
import os


def _plt():
    """pyplot, or None (after one line on stderr) where matplotlib is missing:
    the results are written either way, only the PNG is skipped."""
    try:
        import matplotlib
    except ImportError:
        import sys
        if not getattr(_plt, "said", False):
            print("liblock bench: plot skipped: matplotlib is not installed (`make deps` installs it)",
                  file=sys.stderr)
            _plt.said = True
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


MARKERS = "osD^v<>phX*8"


def _style(i):
    return dict(marker=MARKERS[i % len(MARKERS)], linestyle="-" if i < 10 else "--", markersize=4)


def _subtitle(meta, regime):
    cpu = meta.get("cpu_model", "")
    return (f"{meta.get('date_utc', '')[:16]} UTC, commit {meta.get('git_commit', '?')}, "
            f"probe regime '{regime}', medians (bars: min-max)")


def lockbench_plots(exp, summary, regime, d, meta):
    if regime is None:
        return []
    plt = _plt()
    if plt is None:
        return []
    sel = [s for s in summary if s.get("regime") == regime and s.get("n")]
    present = {s["algorithm"] for s in sel}
    algos = [a for a in meta.get("algorithms", []) if a in present]
    base = meta.get("baseline")
    if base in algos:  # the baseline first, then the registry order
        algos.remove(base)
        algos.insert(0, base)
    algos += sorted(present - set(algos))
    files = []
    if exp in ("contention", "headline"):
        lines = sorted({s["lines"] for s in sel})
        fig, axes = plt.subplots(1, len(lines), figsize=(6.2 * len(lines), 4.8), squeeze=False)
        for ax, k in zip(axes[0], lines):
            for i, a in enumerate(algos):
                pts = sorted((s["delay_cycles"], s) for s in sel if s["lines"] == k and s["algorithm"] == a)
                if not pts:
                    continue
                x = [p[0] for p in pts]
                y = [p[1]["lat_cycles_mean_median"] for p in pts]
                lo = [max(0, p[1]["lat_cycles_mean_median"] - p[1]["lat_cycles_mean_min"]) for p in pts]
                hi = [max(0, p[1]["lat_cycles_mean_max"] - p[1]["lat_cycles_mean_median"]) for p in pts]
                ax.errorbar(x, y, yerr=[lo, hi], label=a, capsize=2, **_style(i))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("delay between critical sections (cycles)   <- high contention | low ->")
            ax.set_ylabel("cycles per critical section (mean, incl. acquisition)")
            t = sel[0]["threads"] if sel else "?"
            ax.set_title(f"{k} shared line{'s' if k != 1 else ''}, {t} threads")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
        fig.suptitle(f"lockbench: CS latency vs contention ({exp})\n{_subtitle(meta, regime)}", fontsize=9)
        fig.tight_layout()
        f = os.path.join(d, f"{exp}-latency-vs-delay.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    if exp == "threads":
        combos = sorted({(s["delay_cycles"], s["lines"]) for s in sel})
        fig, axes = plt.subplots(1, len(combos), figsize=(6.2 * len(combos), 4.8), squeeze=False)
        for ax, (dl, k) in zip(axes[0], combos):
            threads_panel(ax, sel, algos, dl, k, "throughput_cs_per_s", "critical sections per second")
            ax.set_title(f"delay {dl:g} cycles, {k} shared line{'s' if k != 1 else ''}")
        fig.suptitle(f"lockbench: throughput vs threads\n{_subtitle(meta, regime)}", fontsize=9)
        fig.tight_layout()
        f = os.path.join(d, "threads-throughput.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    if exp == "headline":
        from . import _plots_headline
        f = _plots_headline.headline_plot(plt, sel, algos, meta.get("baseline", "posix"), d, _subtitle(meta, regime))
        if f:
            files.append(f)
    return files


def threads_panel(ax, sel, algos, dl, k, metric, ylabel):
    """One panel of a lockbench thread sweep: metric (its _median, bars
    _min-_max) against the thread count, a line per algorithm, at delay dl
    and k shared lines."""
    for i, a in enumerate(algos):
        pts = sorted((s["threads"], s) for s in sel if s["delay_cycles"] == dl and s["lines"] == k
                     and s["algorithm"] == a and s.get(metric + "_median") is not None)
        if not pts:
            continue
        x = [p[0] for p in pts]
        y = [p[1][metric + "_median"] for p in pts]
        lo = [max(0, p[1][metric + "_median"] - p[1][metric + "_min"]) for p in pts]
        hi = [max(0, p[1][metric + "_max"] - p[1][metric + "_median"]) for p in pts]
        ax.errorbar(x, y, yerr=[lo, hi], label=a, capsize=2, **_style(i))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_xticks(ax, sorted({s["threads"] for s in sel if s["delay_cycles"] == dl and s["lines"] == k}))
    ax.set_xlabel("threads (hardware-thread budget T)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)


def _plain_xticks(ax, xs):
    """Ticks at xs, labelled 2, 4, 224 rather than powers of the log base."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    if xs:
        ax.set_xticks(xs)
        ax.set_xlim(min(xs) / 1.3, max(xs) * 1.3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def manycore_plot(summary, regime, algos, mc, meta, path):
    """`liblock bench manycore`: the top row is the contention sweep (mean
    cycles per critical section against the thread count, a panel per
    contention level and line count, like the thesis's Figure 5.2 read along
    the thread axis); the bottom row, when mc is given, memcached Get and Set
    throughput against its worker threads, a line per configuration.  mc:
    {"get"|"set": [(configuration, workers, median, min, max)]}."""
    plt = _plt()
    if plt is None:
        return None
    sel = [s for s in summary if s.get("regime") == regime and s.get("n")] if regime else []
    combos = sorted({(s["delay_cycles"], s["lines"]) for s in sel}, key=lambda c: (c[0], c[1]))
    ncol = max(2, len(combos))
    nrow = 2 if mc else 1
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 4.4 * nrow), squeeze=False)
    for j in range(ncol):
        ax = axes[0][j]
        if j >= len(combos):
            ax.axis("off")
            continue
        dl, k = combos[j]
        threads_panel(ax, sel, algos, dl, k, "lat_cycles_mean", "cycles per critical section (mean, incl. acquisition)")
        cont = {100: "high", 2000000: "low"}.get(int(dl), f"delay {dl:g}")
        ax.set_title(f"{cont} contention (delay {dl:g}), {k} shared line{'s' if k != 1 else ''}", fontsize=9)
    if mc:
        for j in range(ncol):
            ax = axes[1][j]
            test = ("get", "set")[j] if j < 2 else None
            if test is None or not mc.get(test):
                ax.axis("off")
                continue
            names = []
            for row in mc[test]:
                if row[0] not in names:
                    names.append(row[0])
            for i, n in enumerate(names):
                pts = sorted(r[1:] for r in mc[test] if r[0] == n and r[2])
                if not pts:
                    continue
                x = [p[0] for p in pts]
                y = [p[1] for p in pts]
                lo = [max(0, p[1] - p[2]) for p in pts]
                hi = [max(0, p[3] - p[1]) for p in pts]
                ax.errorbar(x, y, yerr=[lo, hi], label=n, capsize=2, **_style(i))
            ax.set_xscale("log", base=2)
            _plain_xticks(ax, sorted({r[1] for r in mc[test]}))
            ax.set_xlabel("memcached worker threads")
            ax.set_ylabel("operations per second")
            ax.set_title(f"memcached {test.capitalize()} (memcslap, 2 clients per worker)", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"liblock bench manycore on {meta.get('ncpus', '?')} CPUs: medians (bars: min-max), "
                 f"{meta.get('date_utc', '')[:16]} UTC, commit {meta.get('git_commit', '?')}, probe regime "
                 f"'{regime}'", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def heatmap(matrix, rows, cols, title, cbar_label, path, fmt="{:.0f}", log=False, xlabel="", ylabel="",
            overlay=None):
    """matrix[r][c] (None = no data); overlay(ax) may draw on top."""
    plt = _plt()
    if plt is None:
        return None
    import math
    from matplotlib.colors import LogNorm
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 3.5, 0.55 * len(rows) + 2.4))
    vals = [v for row in matrix for v in row if v is not None]
    data = [[(v if v is not None else float("nan")) for v in row] for row in matrix]
    norm = LogNorm(vmin=max(min(vals), 1e-9), vmax=max(vals)) if log and vals and min(vals) > 0 else None
    im = ax.imshow(data, aspect="auto", cmap="viridis", norm=norm, origin="upper")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    for r, row in enumerate(matrix):
        for c, v in enumerate(row):
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                frac = im.norm(v)  # light cells get dark text
                ax.text(c, r, fmt.format(v), ha="center", va="center", fontsize=7,
                        color="black" if frac is not None and float(frac) > 0.6 else "white")
    if overlay:
        overlay(ax)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(cbar_label)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def lines_plot(series, title, xlabel, ylabel, path, logx=False, logy=False, twin=None, xticks=None):
    """series: list of (label, xs, ys[, lo, hi]); twin: same for a right axis."""
    plt = _plt()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for i, s in enumerate(series):
        label, xs, ys = s[:3]
        if len(s) == 5:
            lo = [max(0, y - l) for y, l in zip(ys, s[3])]
            hi = [max(0, h - y) for y, h in zip(ys, s[4])]
            ax.errorbar(xs, ys, yerr=[lo, hi], label=label, capsize=2, **_style(i))
        else:
            ax.plot(xs, ys, label=label, **_style(i))
    if logx:
        ax.set_xscale("symlog" if any(x == 0 for s in series for x in s[1]) else "log")
    if logy:
        ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, NullFormatter
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    if xticks:
        ax.set_xticks(xticks)
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
    if logy:
        lo, hi = ax.get_ylim()
        ax.yaxis.set_major_formatter(plain)
        if lo > 0 and hi / lo < 100:  # less than two decades: label the minor ticks too
            ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    if twin:
        ax2 = ax.twinx()
        for i, s in enumerate(twin[1]):
            ax2.plot(s[1], s[2], label=s[0], color=f"C{i + len(series)}", linestyle=":", marker="x")
        ax2.set_ylabel(twin[0])
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7)
    else:
        ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def oversub_plot(summary, algos, tlist, base, meta, path):
    """`liblock bench oversubscription`: per thread count, throughput as a
    ratio to the baseline (target line 0.5 for the non-FIFO locks) and, for
    the FIFO locks, the cost of one hand-off over the wake-up probe (target
    line 2).  A run that did not complete is marked on the axis."""
    plt = _plt()
    if plt is None:
        return None
    fig, axes = plt.subplots(2, len(tlist), figsize=(max(7, 0.55 * len(algos) + 2.5) * len(tlist) / 1.4, 8.2),
                             squeeze=False)
    fifo = [a for a in algos if any(s["algorithm"] == a and s["fifo"] for s in summary)]
    for col, t in enumerate(tlist):
        sel = {s["algorithm"]: s for s in summary if s["threads"] == t}
        ax = axes[0][col]
        xs = [a for a in algos if a in sel]
        for i, a in enumerate(xs):
            s = sel[a]
            v = s.get("ratio_vs_baseline_median")
            color = "C1" if s["fifo"] else ("C7" if a == base else "C0")
            if v:
                lo = max(0, v - (s.get("ratio_vs_baseline_min") or v))
                hi = max(0, (s.get("ratio_vs_baseline_max") or v) - v)
                ax.bar(i, v, color=color, yerr=[[lo], [hi]], capsize=2, error_kw=dict(lw=0.7))
            if s["completed"] < s["runs"]:
                ax.annotate(f"{s['runs'] - s['completed']}/{s['runs']}\nbound", (i, 0), xycoords=("data", "axes fraction"),
                            ha="center", va="bottom", fontsize=6, color="red")
        ax.axhline(0.5, color="red", lw=0.8, ls="--", label="target for non-FIFO: 0.5x")
        ax.set_yscale("log")
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, rotation=40, ha="right", fontsize=7)
        ax.set_ylabel(f"throughput / {base} (same round)")
        ax.set_title(f"{t} threads: throughput ratio (orange: FIFO)", fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
        ax = axes[1][col]
        for i, a in enumerate(fifo):
            s = sel.get(a)
            if not s:
                continue
            v = s.get("handoff_over_wake_median")
            if v:
                lo = max(0, v - (s.get("handoff_over_wake_min") or v))
                hi = max(0, (s.get("handoff_over_wake_max") or v) - v)
                ax.bar(i, v, color="C1", yerr=[[lo], [hi]], capsize=2, error_kw=dict(lw=0.7))
            if s["completed"] < s["runs"]:
                ax.annotate(f"{s['runs'] - s['completed']}/{s['runs']}\nbound", (i, 0), xycoords=("data", "axes fraction"),
                            ha="center", va="bottom", fontsize=6, color="red")
        ax.axhline(2.0, color="red", lw=0.8, ls="--", label="target: 2x wake-up")
        ax.set_yscale("log")
        ax.set_xticks(range(len(fifo)))
        ax.set_xticklabels(fifo, rotation=40, ha="right", fontsize=7)
        ax.set_ylabel(f"hand-off / wake-up ({meta.get('wake_ref', 'cross')} CPU)")
        ax.set_title(f"{t} threads: FIFO locks, cost of one hand-off / wake-up probe", fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"oversubscription ({meta.get('ncpus', '?')} CPUs), default policies unless --wait; medians of "
                 f"per-round ratios, bars min-max\n{meta.get('date_utc', '')[:16]} UTC, commit "
                 f"{meta.get('git_commit', '?')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def apps_plot(summary, apps, tlist, algos, bound, meta, path):
    """`liblock bench apps`: one panel per program, time / glibc per
    algorithm (log), one bar per thread count; runs past the bound drawn at
    the bound, hatched; the 2x target line."""
    plt = _plt()
    if plt is None:
        return None
    fig, axes = plt.subplots(len(apps), 1, figsize=(max(8, 0.6 * len(algos) + 3), 3.3 * len(apps)), squeeze=False)
    width = 0.8 / max(1, len(tlist))
    for ax, app in zip(axes[:, 0], apps):
        for j, t in enumerate(tlist):
            for i, a in enumerate(algos):
                s = next((s for s in summary if s["app"] == app and s["threads"] == t and s["algorithm"] == a), None)
                if not s or s["ratio_median"] is None:
                    continue
                x = i + (j - (len(tlist) - 1) / 2) * width
                m = s["ratio_median"]
                over = m == float("inf")
                y = bound if over else m
                ax.bar(x, y, width, color=f"C{j}", hatch="//" if over else None, alpha=0.6 if over else 1.0,
                       label=f"{t} threads" if i == 0 else None)
                if s["failed"]:
                    ax.text(x, y, "F", ha="center", va="bottom", fontsize=7, color="red")
        ax.axhline(2.0, color="red", lw=0.8, ls="--")
        ax.axhline(1.0, color="black", lw=0.5)
        ax.set_yscale("log")
        fin = [s["ratio_median"] for s in summary if s["app"] == app and s["ratio_median"] not in (None, float("inf"))]
        ax.set_ylim(min([0.5] + [0.8 * v for v in fin if v > 0]), bound * 1.3)
        ax.set_xticks(range(len(algos)))
        ax.set_xticklabels(algos, rotation=35, ha="right", fontsize=7)
        ax.set_ylabel("time / glibc (same round)")
        ax.set_title(f"{app}: medians; hatched = killed past {bound:g}x; red line: 2x target", fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"application benchmark under the interposer ({meta.get('ncpus', '?')} CPUs)\n"
                 f"{meta.get('date_utc', '')[:16]} UTC, commit {meta.get('git_commit', '?')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
