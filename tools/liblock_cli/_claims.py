"""The seeds' ordering claims for the headline experiment, checked against
measured medians (`liblock bench headline`, `make demo`, BENCHMARKS.md).

The RCL thesis (Lozi 2014, section 8.2, Fig. 5.2 workload) compares the
algorithms at an equal number of cores (the server's core is one the
application does not get) and states, for the contention microbenchmark:
  - high contention, 5 shared lines: RCL < CC-Synch, DSM-Synch < MCS < POSIX
    (cycles per critical section, lower is better);
  - low contention, 1 line: RCL matches the others;
  - low contention, 5 lines: RCL is the best.
A claim is checked pair by pair on the medians of one probe regime; "matches"
is read as: within MATCH_FACTOR of the median of the other algorithms.  Each
verdict names the pairs that fail, and says what 2 CPUs let the claim show
(what the machine can show, not a diagnosis of the run).
"""

MATCH_FACTOR = 1.25

# (point, ordered groups (each a tuple of algorithms; every member of a group
# must be below every member of the next), text, what 2 CPUs can show)
ORDER_CLAIMS = [
    (("high", 5), [("rcl",), ("cc-synch", "dsm-synch"), ("mcs",), ("posix",)],
     "high contention, 5 lines: rcl < cc-synch, dsm-synch < mcs < posix",
     "on 2 CPUs the order is that of one client against one server (or of two threads), "
     "not of the thesis's 47 queued waiters"),
]
MATCH_CLAIMS = [
    (("low", 1), "rcl", "low contention, 1 line: rcl matches the others",
     "on 2 CPUs rcl has one client and no queue: each request pays a whole round trip to the server "
     "(the RCL latency section), which the others' uncontended acquisitions, taken on the caller's CPU, "
     "do not (mp-server's too, in its direct mode)"),
]
BEST_CLAIMS = [
    (("low", 5), "rcl", "low contention, 5 lines: rcl is the best",
     "on 2 CPUs rcl has one client and no queue: each request pays a whole round trip to the server "
     "(the RCL latency section), while at this contention the others' 5 lines seldom move between the "
     "two CPUs; a cell far above that round trip is not that cost (docs/rcl.md, \"The kernel's share for "
     "other tasks\")"),
]


def _fmt(v):
    return f"{v:.0f}"


def check(cycles):
    """cycles: {(contention, lines): {algorithm: median cycles}} (contention
    'high' or 'low').  Returns a list of dicts: claim, measured, verdict
    ('reproduced', 'not reproduced' or 'not measured'), why (the failing
    pairs, empty when reproduced) and two_cpus."""
    out = []
    for point, groups, text, two in ORDER_CLAIMS:
        c = cycles.get(point, {})
        names = [a for g in groups for a in g]
        missing = [a for a in names if a not in c]
        if missing:
            out.append(dict(claim=text, measured="", verdict="not measured",
                            why="no usable run of " + ", ".join(missing), two_cpus=two))
            continue
        measured = " < ".join(f"{a} {_fmt(v)}" for a, v in sorted(((a, c[a]) for a in names), key=lambda x: x[1]))
        bad = [f"{a} {_fmt(c[a])} >= {b} {_fmt(c[b])}"
               for i, g in enumerate(groups) for h in groups[i + 1:] for a in g for b in h if c[a] >= c[b]]
        out.append(dict(claim=text, measured=measured, verdict="not reproduced" if bad else "reproduced",
                        why="; ".join(bad), two_cpus=two))
    for point, algo, text, two in MATCH_CLAIMS:
        c = cycles.get(point, {})
        others = sorted(v for a, v in c.items() if a != algo)
        if algo not in c or not others:
            out.append(dict(claim=text, measured="", verdict="not measured",
                            why=f"no usable run of {algo}" if algo not in c else "no other algorithm", two_cpus=two))
            continue
        med = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
        r = c[algo] / med
        ok = r <= MATCH_FACTOR
        out.append(dict(claim=text, measured=f"{algo} {_fmt(c[algo])}, the others' median {_fmt(med)} ({r:.2f}x)",
                        verdict="reproduced" if ok else "not reproduced",
                        why="" if ok else f"{algo} is {r:.2f}x the others' median (more than {MATCH_FACTOR}x)",
                        two_cpus=two))
    for point, algo, text, two in BEST_CLAIMS:
        c = cycles.get(point, {})
        if algo not in c or len(c) < 2:
            out.append(dict(claim=text, measured="", verdict="not measured",
                            why=f"no usable run of {algo}" if algo not in c else "no other algorithm", two_cpus=two))
            continue
        ranked = sorted(c.items(), key=lambda x: x[1])
        rank = [a for a, _ in ranked].index(algo) + 1
        best = ranked[0] if ranked[0][0] != algo else ranked[1]
        ok = rank == 1
        out.append(dict(claim=text, measured=f"{algo} {_fmt(c[algo])}, rank {rank} of {len(c)}; best other "
                        f"{best[0]} {_fmt(best[1])}", verdict="reproduced" if ok else "not reproduced",
                        why="" if ok else f"{ranked[0][0]} {_fmt(ranked[0][1])} < {algo} {_fmt(c[algo])}",
                        two_cpus=two))
    return out


def cycles_from_summary(summary, regime):
    """The {(contention, lines): {algorithm: cycles}} of check() from a
    lockbench summary (rows of summary.csv, one regime)."""
    res = {}
    for s in summary:
        if s.get("regime") != regime or not s.get("n") or s.get("lat_cycles_mean_median") in ("", None):
            continue
        cont = {100: "high", 2000000: "low"}.get(int(float(s["delay_cycles"])))
        if cont is None:
            continue
        res.setdefault((cont, int(s["lines"])), {})[s["algorithm"]] = float(s["lat_cycles_mean_median"])
    return res


def print_claims(results, file=None):
    import sys
    f = file or sys.stdout
    print("the seeds' claims (RCL thesis section 8.2, equal CPU budgets) against this run:", file=f)
    for r in results:
        print(f"  {r['verdict'].upper()}: {r['claim']}", file=f)
        if r["measured"]:
            print(f"      measured: {r['measured']}", file=f)
        if r["why"]:
            print(f"      {'why' if r['verdict'] != 'reproduced' else 'note'}: {r['why']}", file=f)
        if r["verdict"] != "reproduced":
            print(f"      {r['two_cpus']}", file=f)
