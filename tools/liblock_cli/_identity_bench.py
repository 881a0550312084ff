"""BENCHMARKS.md's "identity" section: what running a delegated section with
its caller's thread identity (LIBLOCK_IDENTITY=1, docs/internals.md) costs
per section, for every algorithm that runs sections on another thread.

Each delegating algorithm runs lockbench at 2 hardware threads (the server
convention for the server algorithms: one client and the server; two
combining threads otherwise), 5 shared lines per section, once with the
identity switch off and once on, interleaved in each round (order rotated);
the ratio on ÷ off of throughput is taken within a round, and the section
reports its median over the rounds (higher is better: 1.0 = free)."""
import os

from . import _runner
from . import list as list_cmd

ARGS = ["-t", "2", "-k", "5", "-d", "100", "--no-probe", "-f", "json"]


class IdentityError(ValueError):
    pass


def delegating(algos):
    """The names of the algorithms (registry entries, `liblock list --json`)
    whose sections may run on another thread."""
    return [a["name"] for a in algos if "delegates" in a.get("properties", [])]


def run(env, out, quick):
    rounds, dur = (2, "0.05") if quick else (5, "0.4")
    lb = env.program("lockbench")
    base = {k: v for k, v in os.environ.items() if not k.startswith("LIBLOCK_")}
    rows = []
    algos = delegating(list_cmd.algorithms(env))
    for rep in range(rounds):
        pr = _runner.probes(env)
        for algo in algos:
            arms = ("0", "1") if rep % 2 == 0 else ("1", "0")
            for ident in arms:
                r = _runner.run_program([lb, "-a", algo, "-D", dur] + ARGS, 120,
                                        env=dict(base, LIBLOCK_IDENTITY=ident))[-1]
                if r.get("check") != "ok":
                    raise IdentityError(f"identity: lockbench -a {algo} (LIBLOCK_IDENTITY={ident}) failed: "
                                        f"{r.get('error') or r.get('status')}")
                mode = str(r.get("identity", ""))
                if (ident == "1") == mode.startswith("off"):
                    raise IdentityError(f"identity: lockbench -a {algo} with LIBLOCK_IDENTITY={ident} reports identity "
                                        f"switching '{mode}'")
                rows.append({"rep": rep, "algorithm": algo, "identity": ident, "policy": r.get("wait"), "mode": mode,
                             "throughput": r["throughput_cs_per_s"], "probe_ns": pr.get("probe_ns", "")})
    _runner.write_csv(os.path.join(out, "runs.csv"), rows)


def reduce(runs, algos, median):
    """Rows of the section's CSV from the runs (dicts as read back from
    runs.csv): per algorithm, median throughput off and on, the median of
    the per-round ratios on ÷ off, and the added ns per section."""
    rows = []
    for algo in algos:
        mine = [r for r in runs if r["algorithm"] == algo]
        by_rep = {}
        for r in mine:
            by_rep.setdefault(r["rep"], {})[r["identity"]] = float(r["throughput"])
        ratios = [d["1"] / d["0"] for d in by_rep.values() if d.get("0") and d.get("1")]
        if not ratios:
            raise IdentityError(f"identity: no complete round for {algo}")
        off = median(float(r["throughput"]) for r in mine if r["identity"] == "0")
        on = median(float(r["throughput"]) for r in mine if r["identity"] == "1")
        mid, lo, hi = _runner.med_min_max(ratios)
        rows.append({"algorithm": algo, "policy": mine[0].get("policy", ""), "rounds": len(ratios),
                     "off_cs_per_s": off, "on_cs_per_s": on, "ratio": mid, "ratio_min": lo, "ratio_max": hi,
                     "added_ns": 1e9 / on - 1e9 / off if on and off else None})
    return ["algorithm", "policy", "rounds", "off_cs_per_s", "on_cs_per_s", "ratio", "ratio_min", "ratio_max",
            "added_ns"], rows
