"""The headline plot (`liblock bench headline`, `make demo`): one panel per
point (high and low contention, 1 and 5 shared lines), a horizontal bar per
algorithm with its ratio to the baseline (log scale, lower is better),
sorted best first, the baseline's 1.0 marked; the algorithms a seed's claim
names for that panel are coloured, and the claim with its verdict is the
panel's caption."""
import os

from . import _claims

POINTS = [(100, 1), (2000000, 1), (100, 5), (2000000, 5)]
CLAIM_COLOUR, OTHER_COLOUR, BASE_COLOUR = "#d95f02", "#7f9fbf", "#444444"


def _claim_for(cont, lines, results):
    """(algorithms the seed names at this point, caption) or (set(), "")."""
    for point, groups, text, _ in _claims.ORDER_CLAIMS:
        if point == (cont, lines):
            names = {a for g in groups for a in g}
            return names, next((f"seed: {r['claim'].split(': ', 1)[1]} -> {r['verdict']}"
                                for r in results if r["claim"] == text), "")
    for point, algo, text, _ in _claims.MATCH_CLAIMS + _claims.BEST_CLAIMS:
        if point == (cont, lines):
            return {algo}, next((f"seed: {r['claim'].split(': ', 1)[1]} -> {r['verdict']}"
                                 for r in results if r["claim"] == text), "")
    return set(), ""


def headline_plot(plt, sel, algos, base, d, subtitle):
    """Writes d/headline.png from the summary rows sel (one regime) and
    returns its path, or None when no panel has a number."""
    cyc = _claims.cycles_from_summary(sel, sel[0]["regime"]) if sel else {}
    results = _claims.check(cyc)
    fig, axes = plt.subplots(2, 2, figsize=(12, 0.26 * len(algos) * 2 + 3.2), squeeze=False)
    drawn = 0
    for ax, (dl, k) in zip([a for row in axes for a in row], POINTS):
        cont = {100: "high", 2000000: "low"}[dl]
        cells = {}
        for s in sel:
            if int(float(s["delay_cycles"])) == dl and int(s["lines"]) == k and s["algorithm"] in algos:
                r = s.get("ratio_vs_" + base)
                if r not in ("", None):
                    cells[s["algorithm"]] = float(r)
        named, caption = _claim_for(cont, k, results)
        ax.set_title(f"{cont} contention, {k} shared line{'s' if k != 1 else ''}"
                     + (f"\n{caption}" if caption else ""), fontsize=8)
        if not cells:
            ax.text(0.5, 0.5, "no usable run", ha="center", va="center", transform=ax.transAxes)
            ax.set_yticks([])
            continue
        drawn += 1
        order = sorted(cells, key=lambda a: cells[a], reverse=True)  # best at the top
        colours = [BASE_COLOUR if a == base else CLAIM_COLOUR if a in named else OTHER_COLOUR for a in order]
        ax.barh(range(len(order)), [cells[a] for a in order], color=colours, height=0.7)
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels(order, fontsize=7)
        ax.set_xscale("log")
        lo, hi = min(cells.values()), max(cells.values())
        ticks = [t for t in (0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 20, 50, 100, 200, 500) if lo / 1.5 <= t <= hi * 1.5]
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.axvline(1.0, color=BASE_COLOUR, lw=0.8, ls="--")
        for i, a in enumerate(order):
            ax.text(cells[a], i, f" {cells[a]:.2f}", va="center", fontsize=6)
        ax.set_xlabel(f"cycles per critical section / {base}'s (log; lower is better)", fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    if not drawn:
        plt.close(fig)
        return None
    fig.suptitle("headline: every algorithm at its default policy, equal CPU budgets (delegation: server convention)"
                 f"\norange: the algorithms the seed's claim names; grey: {base}\n{subtitle}", fontsize=9)
    fig.tight_layout()
    f = os.path.join(d, "headline.png")
    fig.savefig(f, dpi=100)
    plt.close(fig)
    return f
