"""The targets of `liblock bench auto` (docs/auto.md), computed from its runs:
per (program, threads), each algorithm's throughput over glibc's in the same
round, the best fixed algorithm (chosen after the fact, by its median), and
auto over that best in the same round.  Throughput is higher-is-better: for a
program that does a fixed amount of work it is 1 / wall time, for one that
runs for a fixed time its own count per second; a run killed past its bound
counts as throughput 0, a run that failed (wrong output, exit status) is
reported, not counted.

Targets, per (program, threads):
  best:  auto's median of auto / best-fixed (same round) >= BEST_MIN (0.95);
  glibc: auto's median over glibc >= 1.0, or the rounds' spread reaches 1.0
         (its best round is at or above 1.0);
  gain:  where the best fixed algorithm's median reaches GAIN_IF (1.3), auto's
         median reaches GAIN_MIN (1.2)."""

BEST_MIN = 0.95
GAIN_IF = 1.3
GAIN_MIN = 1.2


def median(vals):
    v = sorted(vals)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def round_ratios(rows):
    """{(program, threads, algorithm): {rep: ratio}} from run rows with
    status ok / bound / skipped (ratio 0 past the bound) against the glibc
    run of the same round; failed runs and rounds whose glibc run failed are
    left out."""
    glibc = {(r["program"], r["threads"], r["rep"]): r["throughput"] for r in rows
             if r["algorithm"] == "glibc" and r["status"] == "ok" and r["throughput"]}
    out = {}
    for r in rows:
        if r["algorithm"] == "glibc":
            continue
        g = glibc.get((r["program"], r["threads"], r["rep"]))
        if not g:
            continue
        if r["status"] == "ok" and r["throughput"]:
            v = r["throughput"] / g
        elif r["status"] in ("bound", "skipped"):
            v = 0.0
        else:
            continue
        out.setdefault((r["program"], r["threads"], r["algorithm"]), {})[r["rep"]] = v
    return out


def summarise(rows, points, fixed, variants=()):
    """One dict per (program, threads): glibc's median throughput, every
    algorithm's median/min/max ratio, the best fixed algorithm, auto over it
    and the three verdicts.  variants: other configurations of auto
    ("auto:NAME"), reported as auto is (their ratio over the best too), never
    counted as fixed algorithms."""
    rr = round_ratios(rows)
    out = []
    for (prog, t) in points:
        g = [r["throughput"] for r in rows if r["program"] == prog and r["threads"] == t
             and r["algorithm"] == "glibc" and r["status"] == "ok" and r["throughput"]]
        s = {"program": prog, "threads": t, "glibc_throughput": median(g), "rounds": len(g)}
        meds = {}
        for a in ["auto"] + list(variants) + list(fixed):
            vals = list(rr.get((prog, t, a), {}).values())
            fails = sum(1 for r in rows if r["program"] == prog and r["threads"] == t and r["algorithm"] == a
                        and r["status"] == "failed")
            s[f"{a}_median"] = median(vals)
            s[f"{a}_min"] = min(vals) if vals else None
            s[f"{a}_max"] = max(vals) if vals else None
            s[f"{a}_failed"] = fails
            if a in fixed and vals:
                meds[a] = median(vals)
        best = max(meds, key=lambda a: meds[a]) if meds else None
        s["best"] = best
        s["best_median"] = meds.get(best)
        for a in ["auto"] + list(variants):
            auto = rr.get((prog, t, a), {})
            per = [auto[k] / rr[(prog, t, best)][k] for k in auto
                   if best and k in rr.get((prog, t, best), {}) and rr[(prog, t, best)][k] > 0]
            s[f"{a}_vs_best_median"] = median(per)
            s[f"{a}_vs_best_min"] = min(per) if per else None
            s[f"{a}_vs_best_max"] = max(per) if per else None
        s.update(verdicts(s))
        out.append(s)
    return out


def verdicts(s):
    """The three targets of one summary row: 'meets', 'MISSES' or 'no data'
    (and 'n/a' for the gain target where no fixed algorithm reaches GAIN_IF)."""
    am, amax = s.get("auto_median"), s.get("auto_max")
    vb = s.get("auto_vs_best_median")
    if s.get("auto_failed"):
        bad = "MISSES (auto failed)"
        return {"target_best": bad, "target_glibc": bad, "target_gain": bad}
    v = {"target_best": "no data" if vb is None else "meets" if vb >= BEST_MIN else "MISSES",
         "target_glibc": "no data" if am is None else "meets" if am >= 1.0 or (amax or 0) >= 1.0 else "MISSES"}
    bm = s.get("best_median")
    if bm is None or am is None:
        v["target_gain"] = "no data"
    elif bm < GAIN_IF:
        v["target_gain"] = "n/a"
    else:
        v["target_gain"] = "meets" if am >= GAIN_MIN else "MISSES"
    return v
