"""The text table and the plot of `liblock profile` (docs/profile.md,
"The report")."""
import shutil
import subprocess

from . import _profauto
from ._profadvice import pct


def demangler(names):
    """{mangled: readable} for C++ names, through binutils' c++filt when it is
    there (the JSON keeps the symbols as the runtime found them)."""
    names = sorted({n for n in names if n and n.startswith("_Z")})
    tool = shutil.which("c++filt")
    if not names or not tool:
        return {}
    try:
        out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True,
                             timeout=20).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {m: d for m, d in zip(names, out) if d}


def _frame_names(lock):
    return [f.split(" ", 1)[1] for f in lock.get("frames") or [] if " " in f]


def fmt_ns(ns):
    if ns is None:
        return "-"
    if ns >= 1e9:
        return f"{ns / 1e9:.3g}s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g}ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g}us"
    return f"{ns:.0f}ns"


def fmt_bound(ns):
    return "-" if ns is None else "<" + fmt_ns(ns)


def fmt_count(n):
    if n >= 1_000_000:
        return f"{n / 1e6:.3g}M"
    if n >= 100_000:
        return f"{n / 1e3:.0f}k"
    return str(n)


def _cut(text, w):
    text = text or "-"
    return text if len(text) <= w else "…" + text[-(w - 1):]


_KINDS = (("mutexes", "mutex", "mutexes"), ("conds", "condition variable", "condition variables"),
          ("sems", "semaphore", "semaphores"))
_REASON_TEXT = {"process_shared": "process-shared", "robust": "robust", "prio_inherit": "priority-inheritance",
                "prio_protect": "priority-protection", "config": "left to glibc by the configuration",
                "setup": "met while another lock was being set up", "no_memory": "out of memory"}


def glibc_line(tg):
    """"3 mutexes and 1 condition variable went to glibc: 2 robust, ..." (the
    interposer's exit line, src/shim/to_glibc.c), or None when none did."""
    if not tg:
        return None
    parts = [f"{tg[k]} {one if tg[k] == 1 else many}" for k, one, many in _KINDS if tg.get(k)]
    if not parts:
        return None
    kinds = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    why = ", ".join(f"{n} {_REASON_TEXT.get(r, r)}" for r, n in tg.get("reasons", {}).items())
    return f"{kinds} went to glibc: {why}"


def text_report(rep, top, thresholds_src, th, title=None):
    """The report as a list of lines (printed on stderr)."""
    out = []
    argv = rep.get("argv") or [rep.get("program") or "?"]
    lock = rep.get("lock") or "glibc"
    on = "glibc's mutexes" if lock == "glibc" else ("the per-site configuration" if lock == "config" else lock)
    ex = rep.get("exit") or {}
    how = {"signal": f", killed by signal {ex.get('signal')}", "usr1": ", snapshot (SIGUSR1)",
           "_exit": f", _exit({ex.get('status')})"}.get(ex.get("how"), "")
    out.append(f"liblock profile{(' ' + title) if title else ''}: {' '.join(argv)[:100]} (pid {rep.get('pid')}){how}")
    out.append(f"  {fmt_ns(rep['wall_ns'])} wall, {rep['threads']} thread(s) created, {rep['cpus']} CPU(s), on {on}")
    out.append(f"  time in critical sections (incl. acquire and release): {pct(rep['cs_share'])} of "
               f"{fmt_ns(rep['thread_ns'])} of thread time (the sum of the lifetimes of all threads, main included)")
    if rep.get("time_every", 1) > 1:
        out.append(f"  hold times: estimated from 1 in {rep['time_every']} uncontended acquisitions, drawn at random "
                   "(--time-every); counts and waits are exact")
    if not rep["misses_available"]:
        out.append(f"  cache misses: not available on this machine ({rep.get('misses_reason') or 'no reason given'})")
    up = pct(th["upper"]) if th.get("upper") is not None else "none"
    when = f", {th.get('date_utc')}" if th.get("date_utc") else ""
    over = f", more threads than CPUs: {th['best_oversubscribed']}" if th.get("best_oversubscribed") else ""
    out.append(f"  advice thresholds: lower {pct(th['lower'])}, upper {up}{over} ({thresholds_src}{when})"
               + ("" if lock == "glibc" else "; they were calibrated for programs on glibc's mutex"))
    tg = glibc_line(rep.get("to_glibc"))
    if tg:
        out.append(f"  {tg} (not measured; `liblock run` leaves them to glibc too)")
    locks = rep["locks"]
    if not locks:
        out.append("  no pthread mutex was used.")
        return out
    exact = "exact mean" if rep.get("time_every", 1) <= 1 else "mean (hold: estimated)"
    out.append(f"  wait and hold: {exact} / p50 / p99, the percentiles as upper bounds of log2 buckets "
               "(the value lies within a factor 2 below)")
    head = (f"{'#':>3} {'share':>6} {'util':>5} {'site':<24} {'function':<16} {'count':>5} {'acquired':>9} "
            f"{'cont':>6} {'wait mean/p50/p99':>24} {'hold mean/p50/p99':>24} {'miss/CS':>7}  advice")
    out.append(head)
    shown = locks[:top]
    dm = demangler([lk.get("function") for lk in shown] + [n for lk in shown for n in _frame_names(lk)]
                   + [c.get("function") for lk in shown for c in lk.get("call_sites") or []])
    same = {}
    for lk in locks:
        same[lk["site"]] = same.get(lk["site"], 0) + 1
    for i, lk in enumerate(shown, 1):
        acq = lk["acquisitions"]
        cont = pct(lk["contended"] / acq) if acq else "-"
        wait = f"{fmt_ns(lk['wait_mean_ns'])}/{fmt_bound(lk['wait_p50_ns_bound'])}/{fmt_bound(lk['wait_p99_ns_bound'])}"
        hold = f"{fmt_ns(lk['hold_mean_ns'])}/{fmt_bound(lk['hold_p50_ns_bound'])}/{fmt_bound(lk['hold_p99_ns_bound'])}"
        miss = f"{lk['misses_per_cs']:.1f}" if lk.get("misses_per_cs") is not None else "n/a"
        adv = lk.get("advice") or {}
        act = adv.get("action", "-")
        if adv.get("algorithm"):
            act += " " + adv["algorithm"] + (f" ({adv['wait']})" if adv.get("wait") else "")
        out.append(f"{i:>3} {pct(lk['cs_share']):>6} {pct(lk['utilisation']):>5} {_cut(lk['site'], 24):<24} "
                   f"{_cut(dm.get(lk.get('function'), lk.get('function')), 16):<16} {lk['count']:>5} {fmt_count(acq):>9} {cont:>6} "
                   f"{wait:>24} {hold:>24} {miss:>7}  {act}")
        extra = [f"id {lk['id']}"]
        if same.get(lk["site"], 0) > 1 and len(lk.get("frames") or []) > 1:
            # several sites init through one wrapper (a C++ mutex class): the callers tell them apart
            via = []
            for f in lk["frames"][1:3]:
                where, _, fn = f.partition(" ")
                via.append(where + (f" ({dm.get(fn, fn)})" if fn and fn != "?" else ""))
            extra.append("initialised via " + " <- ".join(via))
        if lk.get("kind") == "static" and lk.get("first_lock_site"):
            extra.append(f"static mutex, first locked at {lk['first_lock_site']}")
        if lk.get("trylocks"):
            extra.append(f"trylocks {lk['trylocks']} ({lk['trylock_failures']} failed)")
        if lk.get("cond_waits"):
            extra.append(f"cond waits {lk['cond_waits']} ({fmt_ns(lk['cond_wait_ns'])})")
        cs = lk.get("call_sites") or []
        if cs:
            extra.append("call sites: " + ", ".join(
                f"{c['site']}" + (f" in {dm[c['function']]}" if c.get("function") in dm else "")
                + f" ({fmt_count(c['acquisitions'])})" for c in cs[:4])
                         + (f" and {len(cs) - 4} more" if len(cs) > 4 else ""))
        out.append("      " + "; ".join(extra))
        if adv.get("reason"):
            out.append(f"      why: {adv['reason']}")
        out.extend("      " + line for line in _profauto.text_lines(lk))
    if rep.get("auto_unattributed"):
        out.append(f"  auto: {rep['auto_unattributed']} switch(es) of locks the profiler did not record")
    rest = locks[top:]
    if rest:
        share = sum(lk["cs_share"] for lk in rest)
        out.append(f"  ({len(rest)} more lock site(s) below, {pct(share)} together; --top N shows more, --json all)")
    return out


def plot(rep, path, top):
    """Per lock site a bar of its time share split into wait and hold; the
    wait-time histogram of the top lock."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    locks = rep["locks"][:top]
    switched = [lk for lk in locks if lk.get("auto")][:4]
    ncol = 3 if switched else 2
    fig, axes = plt.subplots(1, ncol, figsize=(13 + 5 * (ncol - 2), max(3.5, 0.45 * len(locks) + 1.8)),
                             gridspec_kw={"width_ratios": [3, 2, 2][:ncol]})
    ax1, ax2 = axes[0], axes[1]
    tn = rep["thread_ns"] or 1
    dm = demangler([lk.get("function") for lk in locks])
    labels = [f"{lk['site']}" + (f" ({dm.get(lk['function'], lk['function'])})" if lk.get("function") else "") +
              (f" x{lk['count']}" if lk["count"] > 1 else "") for lk in locks]
    ys = list(range(len(locks)))[::-1]
    w = [100 * lk["wait_ns"] / tn for lk in locks]
    h = [100 * lk["hold_ns"] / tn for lk in locks]
    ax1.barh(ys, w, color="#d62728", label="waiting (call to acquisition)")
    ax1.barh(ys, h, left=w, color="#1f77b4", label="holding (acquisition to release)")
    ax1.set_yticks(ys)
    ax1.set_yticklabels(labels, fontsize=8)
    ax1.set_xlabel("% of thread time (sum of thread lifetimes)")
    ax1.set_title(f"time in critical sections per lock site (program: {100 * rep['cs_share']:.1f}%)", fontsize=10)
    ax1.legend(fontsize=8, loc="lower right")
    if locks:
        hist = locks[0]["wait_hist"]
        last = max([b for b, n in enumerate(hist) if n] or [0])
        xs = list(range(last + 1))
        ax2.bar(xs, hist[:last + 1], color="#d62728")
        ax2.set_yscale("log")
        ticks = [x for x in xs if x % max(1, (last + 1) // 8) == 0]
        ax2.set_xticks(ticks)
        ax2.set_xticklabels([fmt_ns(2 ** x) for x in ticks], fontsize=8, rotation=45)
        ax2.set_xlabel("wait time, log2 bucket [2^b, 2^(b+1)) ns")
        ax2.set_ylabel("acquisitions")
        ax2.set_title(f"wait times of {labels[0]}", fontsize=10)
    else:
        ax2.text(0.5, 0.5, "no lock", ha="center")
    if switched:
        _auto_timeline(axes[2], switched, rep.get("wall_ns", 0) / 1e9, labels, locks)
    fig.suptitle(" ".join(rep.get("argv") or [rep.get("program") or ""])[:120], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _auto_timeline(ax, switched, end_s, labels, locks):
    """auto's candidate over time for the hottest lock sites it switched."""
    names = list(_profauto.CANDIDATES)
    for k, lk in enumerate(switched):
        ts, ys = _profauto.timeline(lk, end_s)
        if max(ys) >= len(names):
            names = list(_profauto.CANDIDATES) + ["other"]
        ax.step(ts, [y + 0.08 * k for y in ys], where="post", label=_cut(labels[locks.index(lk)], 40))
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xlabel("seconds since the program started")
    ax.set_title("auto: the algorithm each lock ran on", fontsize=10)
    ax.legend(fontsize=7, loc="best")
