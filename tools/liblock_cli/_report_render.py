"""Render BENCHMARKS.md from its template (bench/report/BENCHMARKS.md.in)
and the section CSVs (bench/report/SECTION.csv, _report_csv.py).

The template is Markdown with three kinds of placeholder:

  {{run SECTION}}          one line: the commit, machine, date, probe
                           regime(s), command and duration of the section's run
  {{table SECTION}}        the section's table, formatted from its CSV
  {{cell SECTION KEY COL}} one number of a section's CSV (the row whose
                           first column is KEY, column COL), for prose and
                           for the claims table
  {{total_duration}}       the sum of the sections' run times

Rendering reads nothing but the template and the CSVs, so a report can be
re-rendered without rerunning anything; a missing or malformed CSV raises
ReportError and nothing is written.  This module has no knowledge of how the
numbers were measured (that is _report_sections.py)."""
import math
import os
import re

from . import _report_csv
from ._report_csv import ReportError

PLACEHOLDER = re.compile(r"\{\{\s*(run|table|cell|total_duration)\b([^}]*)\}\}")


def _f(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def ratio(v, bold_over=None):
    """1.23× (bold above bold_over); '>10×' for inf; '–' for nothing."""
    x = _f(v)
    if x is None:
        return str(v) if v not in (None, "") else "–"
    if math.isinf(x):
        return ">bound"
    s = f"{x:.2f}×" if x < 10 else f"{x:.0f}×"
    return f"**{s}**" if bold_over is not None and x > bold_over else s


def rate(v):
    x = _f(v)
    if x is None:
        return "–"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def num(v, digits=1):
    x = _f(v)
    if x is None:
        return "–" if v in (None, "") else str(v)
    return f"{x:.{digits}f}"


def _table(head, rows, align=None):
    align = align or ["---"] + ["--:"] * (len(head) - 1)
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def _cols(rows, pattern):
    """The distinct values of the {X} part of columns matching pattern
    (a regex with one group), in header order."""
    if not rows:
        return []
    seen = []
    for k in rows[0]:
        m = re.fullmatch(pattern, k)
        if m and m.group(1) not in seen:
            seen.append(m.group(1))
    return seen


# ------------------------------------------------------------- per section
def t_headline(rows, meta):
    pts = [("high1", "high, 1 line"), ("low1", "low, 1 line"), ("high5", "high, 5 lines"), ("low5", "low, 5 lines")]
    body = []
    for r in rows:
        cells = [(num(r.get(p + "_cycles"), 0) + (f" ({ratio(r.get(p + '_ratio'))})"
                                                   if _f(r.get(p + "_ratio")) is not None else ""))
                 if _f(r.get(p + "_cycles")) is not None else (r.get(p + "_note") or "–") for p, _ in pts]
        body.append([r["algorithm"], r["policy"]] + cells)
    out = _table(["algorithm", "policy"] + [h for _, h in pts], body, ["---", "---"] + ["--:"] * len(pts))
    from . import _claims
    cyc = {}
    for (cont, k), p in (("high", 1), "high1"), (("low", 1), "low1"), (("high", 5), "high5"), (("low", 5), "low5"):
        cyc[(cont, k)] = {r["algorithm"]: _f(r.get(p + "_cycles")) for r in rows if _f(r.get(p + "_cycles")) is not None}
    claims = [[c["claim"], c["measured"] or "–", c["verdict"] + (": " + c["why"] if c["why"] else "")
               + ("" if c["verdict"] == "reproduced" else " (" + c["two_cpus"] + ")")] for c in _claims.check(cyc)]
    return out + [""] + _table(["the seeds' claim (RCL thesis §8.2)", "measured here (cycles)", "verdict"], claims,
                               ["---", "---", "---"])


def t_threads(rows, meta):
    ts = _cols(rows, r"t(\d+)_ratio")
    body = []
    for r in rows:
        cells = []
        for t in ts:
            if _f(r.get(f"t{t}_cs_per_s")) is None:
                cells.append(r.get(f"t{t}_note") or "–")
            elif r["algorithm"] == "posix":
                cells.append(rate(r.get(f"t{t}_cs_per_s")) + " CS/s")
            else:
                cells.append(ratio(r.get(f"t{t}_ratio")))
        body.append([r["algorithm"], r["policy"]] + cells)
    return _table(["algorithm", "policy"] + [f"T={t}" for t in ts], body, ["---", "---"] + ["--:"] * len(ts))


def t_oversubscription(rows, meta):
    ts = _cols(rows, r"t(\d+)_cs_per_s")
    head = ["algorithm", "policy", "FIFO"]
    for t in ts:
        head += [f"{t} thr: CS/s", "× posix", "hand-off ÷ wake"]
    head += ["ceiling × posix", "bound × posix (" + " / ".join(ts) + " thr)", "completed", "target"]
    body = []
    for r in rows:
        fifo = r.get("fifo") == "1"
        cells = [r["algorithm"], r["policy"], "yes" if fifo else "no"]
        for t in ts:
            h = ratio(r.get(f"t{t}_handoff_wake"))
            cells += [rate(r.get(f"t{t}_cs_per_s")), ratio(r.get(f"t{t}_ratio")),
                      h if fifo or h == "–" else f"({h})"]
        bounds = [ratio(r.get(f"t{t}_bound")) for t in ts]
        cells += [ratio(r.get("ceiling_ratio")), " / ".join(bounds) if any(b != "–" for b in bounds) else "–",
                  r.get("completed") or "–", r.get("verdict") or "–"]
        body.append(cells)
    return _table(head, body, ["---", "---", "---"] + ["--:"] * (3 * len(ts) + 2) + ["--:", "---"])


def t_apps(rows, meta):
    cols = _cols(rows, r"(\w+_\d+)")
    cols = [c for c in cols if c not in ("algorithm", "policy")]
    body = []
    for r in rows:
        if r["algorithm"] == "glibc":
            body.append(["glibc (s)", ""] + [num(r.get(c), 3) for c in cols])
        else:
            body.append([r["algorithm"], r["policy"]] + [_app_cell(r.get(c)) for c in cols])
    head = ["algorithm", "policy"] + [c.replace("_", " ") for c in cols]
    return _table(head, body, ["---", "---"] + ["--:"] * len(cols))


def _app_cell(v):
    if v in (None, ""):
        return "–"
    if v == "inf":
        return ">bound"
    if _f(v) is None:
        return str(v)
    return ratio(v, bold_over=2.0)


def _range(m, lo, hi):
    if _f(m) is None:
        return "–"
    return f"{_f(m):.2f} [{_f(lo):.2f}–{_f(hi):.2f}]"


def t_auto(rows, meta):
    body = []
    for r in rows:
        first = r["config"] == "auto"
        prog = r["program"] + (" (held out)" if r.get("held_out") == "1" else "") if first else ""
        api = r["program"] in ("randarray", "lockbench")
        glibc = "" if not first else (rate(r.get("glibc")) + "/s" if api else
                                      f"{1 / _f(r['glibc']):.3f} s" if _f(r.get("glibc")) else "–")
        best = f"{r['best']} {_f(r['best_ratio']):.2f}" if first and _f(r.get("best_ratio")) is not None else ""
        body.append([prog, r["threads"] if first else "", glibc, best, r["config"],
                     _range(r["median"], r["min"], r["max"]),
                     _range(r["vs_best_median"], r["vs_best_min"], r["vs_best_max"]), num(r["switches"], 0),
                     r["target_best"], r["target_glibc"], r["target_gain"]])
    return _table(["program", "threads", "glibc", "best fixed / glibc", "", "/ glibc", "/ best", "switches",
                   "≥ 0.95× best", "≥ glibc", "≥ 1.2× where best ≥ 1.3×"], body,
                  ["---", "--:", "--:", "---", "---", "--:", "--:", "--:", "---", "---", "---"])


def t_condvars(rows, meta):
    kinds = _cols(rows, r"([a-z]+_\d+)")
    kinds = [k for k in kinds if k not in ("algorithm", "policy")]
    body = [[r["algorithm"], r["policy"]] + [_app_cell(r.get(k)) for k in kinds] for r in rows]
    head = ["algorithm", "policy"] + [f"bbuf {k.split('_')[1]}, `{k.split('_')[0]}`" for k in kinds]
    return _table(head, body, ["---", "---"] + ["--:"] * len(kinds))


def t_interposer(rows, meta):
    body = [[r["algorithm"], r["policy"], num(r.get("lazy_glibc_ns"), 2), num(r.get("lazy_ns"), 2),
             ratio(r.get("lazy_ratio")), num(r.get("engaged_ns"), 2), ratio(r.get("engaged_ratio")),
             num(r.get("lazy_mt_glibc_ns"), 2), ratio(r.get("lazy_mt_ratio")), ratio(r.get("engaged_mt_ratio"))]
            for r in rows]
    return _table(["algorithm", "policy", "glibc pair (ns)", "interposed (ns)", "interposed ÷ glibc",
                   "engaged (ns)", "engaged ÷ glibc", "2 threads: glibc pair (ns)", "2 threads: interposed ÷ glibc",
                   "2 threads: engaged ÷ glibc"], body, ["---", "---"] + ["--:"] * 8)


def t_rcl_latency(rows, meta):
    body = [[r["regime"], r["runs"], num(r.get("probe_ns")), num(r.get("empty_ns")),
             f"{ratio(r.get('empty_ratio'))} [{num(r.get('empty_ratio_min'), 2)}–{num(r.get('empty_ratio_max'), 2)}]",
             num(r.get("five_ns")), ratio(r.get("five_ratio"))] for r in rows]
    return _table(["regime", "runs", "probe (ns)", "empty CS (ns)", "empty ÷ probe [min–max]", "5-line CS (ns)",
                   "5-line ÷ probe"], body, ["---"] + ["--:"] * 6)


def t_startup(rows, meta):
    body = []
    for r in rows:
        ms = _f(r.get("median_ms"))
        t = "–" if ms is None else (f"{ms / 1000:.3f} s" if ms >= 100 else f"{ms:.3f} ms")
        body.append([r["workload"], r["arm"], r["runs"], t, ratio(r.get("ratio"))])
    return _table(["workload", "arm", "runs", "median", "÷ plain"], body, ["---", "---", "--:", "--:", "--:"])


def t_randarray(rows, meta):
    body = [[r["combo"], r["policy"], rate(r.get("throughput")) + " ops/s", ratio(r.get("ratio")), num(r.get("avg_lwss")),
             num(r.get("mttr")), num(r.get("gini"), 3), rate(r.get("vcsw")), num(r.get("cpu_util"), 2)] for r in rows]
    return _table(["lock", "policy", "throughput", "× posix", "avg LWSS", "MTTR", "Gini", "vol. csw/s", "CPU util"],
                  body, ["---", "---"] + ["--:"] * 7)


def t_null_rpc(rows, meta):
    body = [[r["layout"], r["regime"], r["n"], num(r.get("cycles"), 0), num(r.get("ns"), 0), num(r.get("probe_ns"), 0)]
            for r in rows]
    return _table(["flags", "regime", "runs", "cycles per RPC", "ns per RPC", "probe (ns)"], body,
                  ["---", "---", "--:", "--:", "--:", "--:"])


def t_store_cas(rows, meta):
    body = [[r["threads"], num(r.get("store"), 1), num(r.get("store_fence"), 1), num(r.get("cas"), 1)] for r in rows]
    return _table(["threads", "store (cycles)", "store + fence", "CAS"], body)


def t_latency_map(rows, meta):
    sizes = [c for c in (rows[0] if rows else {}) if c != "pair"]
    body = [[r["pair"]] + [num(r.get(s), 1) for s in sizes] for r in rows]
    return _table(["written on → read on"] + sizes, body)


def t_profiler(rows, meta):
    body = [[r["pattern"], num(r.get("glibc_ns"), 1), num(r.get("exact_ns"), 1), num(r.get("sampled_ns"), 1),
             f"+{num(r.get('exact_added'), 1)} / +{num(r.get('sampled_added'), 1)}"] for r in rows]
    return _table(["pattern (ns per pair)", "glibc", "profiled, exact", "profiled, 1 in 16 timed",
                   "added: exact / sampled"], body, ["---", "--:", "--:", "--:", "--:"])


def t_identity(rows, meta):
    body = [[r["algorithm"], r["policy"], rate(r.get("off_cs_per_s")), rate(r.get("on_cs_per_s")),
             f"{ratio(r.get('ratio'))} [{ratio(r.get('ratio_min'))}–{ratio(r.get('ratio_max'))}]",
             num(r.get("added_ns"), 1)] for r in rows]
    return _table(["algorithm", "policy", "off, sections/s", "on, sections/s", "on ÷ off [min–max]",
                   "ns added per section"], body, ["---", "---", "--:", "--:", "--:", "--:"])


def t_memcached(rows, meta):
    body = [[r["algorithm"], r["policy"], rate(r.get("set")), ratio(r.get("set_ratio")), rate(r.get("get")),
             ratio(r.get("get_ratio"))] for r in rows]
    return _table(["algorithm", "policy", "Set ops/s", "Set ÷ glibc", "Get ops/s", "Get ÷ glibc"], body,
                  ["---", "---", "--:", "--:", "--:", "--:"])


TABLES = {
    "headline": t_headline, "threads": t_threads, "oversubscription": t_oversubscription, "apps": t_apps,
    "auto": t_auto,
    "condvars": t_condvars, "interposer": t_interposer, "rcl-latency": t_rcl_latency, "startup": t_startup,
    "randarray": t_randarray, "null-rpc": t_null_rpc, "store-cas": t_store_cas, "latency-map": t_latency_map,
    "profiler": t_profiler, "identity": t_identity, "memcached": t_memcached,
}


def run_line(meta):
    """The one line that says where a section's numbers come from."""
    missing = [k for k in ("commit", "machine", "date_utc", "regimes", "command") if not meta.get(k)]
    if missing:
        raise ReportError(f"{meta.get('section', '?')}: run metadata lacks {', '.join(missing)}")
    dur = _f(meta.get("duration_s"))
    quick = meta.get("quick") in ("1", "yes", "true")
    return (f"*Run*: commit `{meta['commit']}`, {meta['machine']}, {meta['date_utc']}; probe regime(s): "
            f"{meta['regimes']}; `{meta['command']}`" + (f", {dur:.0f} s" if dur is not None else "")
            + (" — **a `--quick` smoke run: too short to read anything from**" if quick else "") + ".")


def render(template, load, sections=None):
    """The report: template with its placeholders filled from load(section)
    -> (meta, rows).  Raises ReportError for a missing input or an unknown
    placeholder; returns the text (nothing is written here)."""
    cache = {}

    def get(name):
        if name not in cache:
            if sections is not None and name not in sections:
                raise ReportError(f"the template names section '{name}', which `liblock bench report` does not know")
            meta, rows = load(name)
            if meta.get("section") and meta["section"] != name:
                raise ReportError(f"{name}.csv holds section '{meta['section']}'")
            cache[name] = (meta, rows)
        return cache[name]

    used = []

    def sub(m):
        kind, arg = m.group(1), m.group(2).split()
        if kind == "total_duration":
            for n in used:
                get(n)
            tot = sum(_f(meta.get("duration_s")) or 0 for meta, _ in cache.values())
            return f"{tot / 60:.1f} min"
        if not arg:
            raise ReportError(f"placeholder {m.group(0)} names no section")
        name = arg[0]
        meta, rows = get(name)
        used.append(name)
        if kind == "run":
            return run_line(meta)
        if kind == "table":
            fmt = TABLES.get(name)
            if fmt is None:
                raise ReportError(f"no table format for section '{name}'")
            if not rows:
                raise ReportError(f"{name}.csv has no rows")
            return "\n".join(fmt(rows, meta))
        if len(arg) != 3:
            raise ReportError(f"{m.group(0)}: expected {{{{cell SECTION KEY COLUMN}}}}")
        key, col = arg[1], arg[2]
        first = next(iter(rows[0])) if rows else None
        row = next((r for r in rows if r.get(first) == key), None)
        if row is None or col not in row:
            raise ReportError(f"{m.group(0)}: {name}.csv has no row '{key}' with column '{col}'")
        v = row[col]
        x = _f(v)
        if x is None:
            return v or "–"
        return f"{x:.2f}" if abs(x) < 100 else f"{x:.0f}"

    # total_duration must see every section, so resolve it last
    text = PLACEHOLDER.sub(lambda m: m.group(0) if m.group(1) == "total_duration" else sub(m), template)
    text = PLACEHOLDER.sub(sub, text)
    text = text.replace("–×", "–")  # a missing number takes no unit
    left = re.search(r"\{\{[^}]*\}\}", text)
    if left:
        raise ReportError(f"unknown placeholder {left.group(0)} in the template")
    return text


def csv_loader(csv_dir):
    def load(name):
        return _report_csv.read(os.path.join(csv_dir, name + ".csv"))
    return load


def render_file(template_path, csv_dir, out_path, sections=None):
    """Render and replace out_path only once the whole text is rendered."""
    try:
        with open(template_path) as f:
            template = f.read()
    except OSError as e:
        raise ReportError(f"{template_path}: {e}")
    text = render(template, csv_loader(csv_dir), sections)
    _report_csv.write_atomic(out_path, text)
    return text
