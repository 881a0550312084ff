"""PNG plots of `liblock bench` results (matplotlib, Agg backend).  Every plot
states the probe regime its numbers come from and the number of runs."""
import os


def _plt():
    import matplotlib
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
            for i, a in enumerate(algos):
                pts = sorted((s["threads"], s) for s in sel if s["delay_cycles"] == dl and s["lines"] == k
                             and s["algorithm"] == a)
                if not pts:
                    continue
                x = [p[0] for p in pts]
                y = [p[1]["throughput_cs_per_s_median"] for p in pts]
                lo = [max(0, p[1]["throughput_cs_per_s_median"] - p[1]["throughput_cs_per_s_min"]) for p in pts]
                hi = [max(0, p[1]["throughput_cs_per_s_max"] - p[1]["throughput_cs_per_s_median"]) for p in pts]
                ax.errorbar(x, y, yerr=[lo, hi], label=a, capsize=2, **_style(i))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("threads (hardware-thread budget T)")
            ax.set_ylabel("critical sections per second")
            ax.set_title(f"delay {dl:g} cycles, {k} shared line{'s' if k != 1 else ''}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
        fig.suptitle(f"lockbench: throughput vs threads\n{_subtitle(meta, regime)}", fontsize=9)
        fig.tight_layout()
        f = os.path.join(d, "threads-throughput.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    if exp == "headline":
        base = meta.get("baseline", "posix")
        pts = sorted({(s["lines"], s["delay_cycles"]) for s in sel})
        fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(algos) + 3), 4.6))
        width = 0.8 / max(1, len(pts))
        for j, (k, dl) in enumerate(pts):
            ys, lo, hi = [], [], []
            for a in algos:
                s = next((s for s in sel if s["algorithm"] == a and s["lines"] == k and s["delay_cycles"] == dl), None)
                ys.append(s["lat_cycles_mean_median"] if s else 0)
                lo.append(s["lat_cycles_mean_median"] - s["lat_cycles_mean_min"] if s else 0)
                hi.append(s["lat_cycles_mean_max"] - s["lat_cycles_mean_median"] if s else 0)
            cont = {100: "high", 2000000: "low"}.get(int(dl), f"d={dl:g}")
            ax.bar([i + (j - (len(pts) - 1) / 2) * width for i in range(len(algos))], ys, width,
                   yerr=[lo, hi], capsize=2, error_kw=dict(lw=0.7),
                   label=f"{cont} contention, {k} line{'s' if k != 1 else ''}")
        ax.set_xticks(range(len(algos)))
        ax.set_xticklabels(algos, rotation=30, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("cycles per critical section (mean)")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"headline: every algorithm, lower is better (missing bar: no usable run in this regime)\n"
                     f"{_subtitle(meta, regime)}", fontsize=9)
        fig.tight_layout()
        f = os.path.join(d, "headline.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files


def heatmap(matrix, rows, cols, title, cbar_label, path, fmt="{:.0f}", log=False, xlabel="", ylabel="",
            overlay=None):
    """matrix[r][c] (None = no data); overlay(ax) may draw on top."""
    plt = _plt()
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
