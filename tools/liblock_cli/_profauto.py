"""What `auto` decided, per lock site, for `liblock profile`.

auto writes one line per switch to LIBLOCK_AUTO_LOG (src/locks/adaptive/auto.c,
log_switch): "SECONDS.NANOS pid PID lock 0xADDR FROM -> TO: REASON", the time
on CLOCK_MONOTONIC and the lock named by its liblock_t, which the profiler
records per instance (`lock` in the raw dump).  attach() puts each switch on
the lock site whose instance it names, as `auto` in the report (docs/profile.md).
"""
import re

from ._autochoice import CANDIDATES  # noqa: F401  (the plot's rows; _profreport reads it here)

_LINE = re.compile(r"^(\d+)\.(\d{9}) pid (\d+) lock (\S+) (\S+) -> (\S+): (.*)$")


def read_log(path):
    """The switches in the log at path, in file order: a list of dicts
    (t_ns, pid, lock, from, to, why); lines that are not switch lines are
    skipped and counted.  Returns (switches, skipped)."""
    out, skipped = [], 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = _LINE.match(line.rstrip("\n"))
                if not m:
                    skipped += 1 if line.strip() else 0
                    continue
                out.append({"t_ns": int(m.group(1)) * 1000000000 + int(m.group(2)), "pid": int(m.group(3)),
                            "lock": _norm(m.group(4)), "from": m.group(5), "to": m.group(6), "why": m.group(7)})
    except FileNotFoundError:
        pass
    return out, skipped


def _norm(p):
    """A pointer as printed by %p ("0x7f..", or "(nil)"), as an int, or None."""
    try:
        return int(p, 16)
    except (TypeError, ValueError):
        return None


def attach(rep, switches, start_ns):
    """Add `auto` to every lock site of rep whose instances a switch names:
    {"start": candidate, "switches": [{"t_s", "from", "to", "why"}], "final": candidate}
    (start: the first switch's "from"),
    t_s in seconds from start_ns (the program's start).  Only switches of
    rep's process (pid) count.  Returns the number of switches of that
    process that named no recorded instance (locks the profiler did not
    record: --only, or a lock made before the profiler started)."""
    pid = rep.get("pid")
    owner = {}
    for lk in rep.get("locks", []):
        for inst in lk.get("instances", []):
            key = _norm(inst.get("lock"))
            if key is not None:
                owner[key] = lk
    lost = 0
    for sw in switches:
        if pid is not None and sw["pid"] != pid:
            continue
        lk = owner.get(sw["lock"])
        if lk is None:
            lost += 1
            continue
        a = lk.setdefault("auto", {"switches": []})
        a["switches"].append({"t_s": max(0.0, (sw["t_ns"] - start_ns) / 1e9), "from": sw["from"], "to": sw["to"],
                              "why": sw["why"]})
    for lk in rep.get("locks", []):
        a = lk.get("auto")
        if a:
            a["switches"].sort(key=lambda s: s["t_s"])
            a["start"] = a["switches"][0]["from"]
            a["final"] = a["switches"][-1]["to"]
    return lost


def text_lines(lk, limit=4):
    """The report's lines for one lock site's auto decisions ([] if none)."""
    a = lk.get("auto")
    if not a:
        return []
    sw = a["switches"]
    first = "; ".join(f"{s['t_s']:.3f} s {s['from']} -> {s['to']} ({s['why']})" for s in sw[:limit])
    more = f"; and {len(sw) - limit} more" if len(sw) > limit else ""
    return [f"auto: {len(sw)} switch(es), ended on {a['final']}: {first}{more}"]


def timeline(lk, end_s):
    """(times, candidate row) steps of one site's auto decisions, from 0 to
    end_s, for a step plot; row = index in CANDIDATES (unknown names last)."""
    a = lk["auto"]

    def row(name):
        return CANDIDATES.index(name) if name in CANDIDATES else len(CANDIDATES)
    ts, ys = [0.0], [row(a["start"])]
    for s in a["switches"]:
        ts.append(s["t_s"])
        ys.append(row(s["to"]))
    ts.append(max(end_s, ts[-1]))
    ys.append(ys[-1])
    return ts, ys
