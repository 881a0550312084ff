"""From the raw dump of liblock-profile.so to the report of `liblock profile`.

The runtime writes one JSON object per process (format liblock-profile-raw/1,
docs/profile-runtime.md): sites with their call sites, log2 wait and hold
histograms and instances, each instance with exact counts and time sums.
(Dumps of earlier runtimes carried histograms and call sites per instance;
they are still read.)
`aggregate()` turns it into the documented report (docs/profile.md, "JSON
contract"): one entry per initialisation site, summed over its instances,
its call sites merged across instances, sorted by share of time in critical
sections.
"""
import json

FORMAT = "liblock-profile-raw/1"
NBUCKETS = 40
_INST_INT = ("acquisitions", "contended", "trylocks", "trylock_failures", "cond_waits", "cond_wait_ns",
             "wait_ns", "hold_ns")


class DumpError(Exception):
    pass


def load(path):
    """Read and check a raw dump; DumpError names the first problem."""
    try:
        with open(path) as f:
            raw = json.load(f)
    except json.JSONDecodeError as e:
        raise DumpError(f"{path}: not JSON ({e.msg} at line {e.lineno})")
    check(raw, path)
    return raw


def _need(obj, key, kind, where):
    if key not in obj:
        raise DumpError(f"{where}: missing '{key}'")
    v = obj[key]
    bad = isinstance(v, bool) != (kind is bool) or not isinstance(v, kind)
    if bad:
        raise DumpError(f"{where}: '{key}' has the wrong type ({type(v).__name__})")
    return v


def check(raw, where="dump"):
    if not isinstance(raw, dict):
        raise DumpError(f"{where}: not a JSON object")
    fmt = raw.get("format")
    if fmt != FORMAT:
        raise DumpError(f"{where}: format '{fmt}' is not {FORMAT}")
    for k in ("wall_ns", "thread_ns", "threads", "cpus"):
        if _need(raw, k, int, where) < 0:
            raise DumpError(f"{where}: '{k}' is negative")
    _need(raw, "misses_available", bool, where)
    for i, s in enumerate(_need(raw, "sites", list, where)):
        sw = f"{where}: sites[{i}]"
        if not isinstance(s, dict):
            raise DumpError(f"{sw}: not an object")
        _need(s, "id", str, sw)
        _need(s, "site", str, sw)
        for h in ("wait_hist", "hold_hist"):
            if h in s:
                _check_hist(s[h], h, sw)
        insts = _need(s, "instances", list, sw)
        for j, inst in enumerate(insts):
            iw = f"{sw}.instances[{j}]"
            if not isinstance(inst, dict):
                raise DumpError(f"{iw}: not an object")
            for k in _INST_INT:
                if _need(inst, k, int, iw) < 0:
                    raise DumpError(f"{iw}: '{k}' is negative")
            for h in ("wait_hist", "hold_hist"):
                if h in inst:
                    _check_hist(inst[h], h, iw)
                elif h not in s:
                    raise DumpError(f"{iw}: missing '{h}' (neither the site nor the instance has it)")
            for c in inst.get("call_sites", []):
                if not isinstance(c, dict) or "site" not in c:
                    raise DumpError(f"{iw}: a call site without 'site'")
        if not isinstance(s.get("call_sites", []), list):
            raise DumpError(f"{sw}: 'call_sites' is not a list")
        for c in s.get("call_sites", []):
            if not isinstance(c, dict) or "site" not in c:
                raise DumpError(f"{sw}: a call site without 'site'")


def _check_hist(hist, h, where):
    if not isinstance(hist, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in hist):
        raise DumpError(f"{where}: '{h}' holds a value that is not a count")


def bucket_upper_ns(b):
    """Bucket b holds values v with floor(log2 v) == b (v = 0 in bucket 0):
    every value in it is < 2**(b+1) ns."""
    return 2 ** (b + 1)


def hist_quantile(hist, q):
    """Upper bound (ns) of the log2 bucket that holds the q-quantile, or None
    for an empty histogram.  A bound, not a value: the true quantile lies in
    [2**b, 2**(b+1))."""
    total = sum(hist)
    if not total:
        return None
    rank = q * total
    acc = 0
    for b, n in enumerate(hist):
        acc += n
        if acc >= rank and n:
            return bucket_upper_ns(b)
    return bucket_upper_ns(len(hist) - 1)


def _add_hist(a, b):
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def _share(wait, hold, thread_ns):
    return (wait + hold) / thread_ns if thread_ns > 0 else 0.0


def _merge_call_sites(lists):
    merged = {}
    for cs in lists:
        for c in cs:
            if not c.get("acquisitions") and not c.get("wait_ns") and not c.get("hold_ns"):
                continue  # e.g. a forked child's copy of a call site only its parent used
            m = merged.setdefault(c["site"], {"site": c["site"], "function": c.get("function"),
                                              "acquisitions": 0, "wait_ns": 0, "hold_ns": 0})
            for k in ("acquisitions", "wait_ns", "hold_ns"):
                m[k] += int(c.get(k) or 0)
            if m["function"] is None and c.get("function"):
                m["function"] = c["function"]
    return sorted(merged.values(), key=lambda c: (-(c["wait_ns"] + c["hold_ns"]), -c["acquisitions"], c["site"]))


def _stats(entry, wait_hist, hold_hist):
    acq = entry["acquisitions"]
    entry["wait_mean_ns"] = round(entry["wait_ns"] / acq, 1) if acq else None
    entry["hold_mean_ns"] = round(entry["hold_ns"] / acq, 1) if acq else None
    if wait_hist is None:  # an instance of a current dump: histograms are per site
        return
    entry["wait_p50_ns_bound"] = hist_quantile(wait_hist, 0.5)
    entry["wait_p99_ns_bound"] = hist_quantile(wait_hist, 0.99)
    entry["hold_p50_ns_bound"] = hist_quantile(hold_hist, 0.5)
    entry["hold_p99_ns_bound"] = hist_quantile(hold_hist, 0.99)
    entry["wait_hist"] = wait_hist
    entry["hold_hist"] = hold_hist


def aggregate(raw):
    """The report (without advice): see docs/profile.md, "JSON contract"."""
    thread_ns, wall_ns = raw["thread_ns"], raw["wall_ns"]
    avail = bool(raw["misses_available"])
    locks = []
    for s in raw["sites"]:
        insts = s["instances"]
        lock = {"id": s["id"], "site": s["site"], "function": s.get("function"), "kind": s.get("kind"),
                "first_lock_site": s.get("first_lock_site"), "frames": s.get("frames", []),
                "count": len(insts)}
        for k in _INST_INT:
            lock[k] = sum(i[k] for i in insts)
        lock["cs_share"] = _share(lock["wait_ns"], lock["hold_ns"], thread_ns)
        per = []
        for i in insts:
            u = i["hold_ns"] / wall_ns if wall_ns else 0.0
            m = i.get("misses")
            pi = {"addr": i.get("addr"), "lock": i.get("lock"), "type": i.get("type")}
            pi.update({k: i[k] for k in _INST_INT})
            pi["cs_share"] = _share(i["wait_ns"], i["hold_ns"], thread_ns)
            pi["utilisation"] = min(1.0, u)
            pi["misses"] = m if avail else None
            pi["misses_per_cs"] = (m / i["acquisitions"]) if (avail and m is not None and i["acquisitions"]) else None
            _stats(pi, list(i["wait_hist"]) if "wait_hist" in i else None,
                   list(i["hold_hist"]) if "hold_hist" in i else None)
            if "call_sites" in i:  # an earlier runtime's dump
                pi["call_sites"] = _merge_call_sites([i["call_sites"]])
            per.append(pi)
        # utilisation of a site: its busiest instance (eleven locks at one
        # site at 50% each are not a lock at 550%); the sum is kept too
        lock["utilisation"] = max((p["utilisation"] for p in per), default=0.0)
        lock["utilisation_sum"] = sum(i["hold_ns"] for i in insts) / wall_ns if wall_ns else 0.0
        misses = [i.get("misses") for i in insts]
        if avail and insts and all(m is not None for m in misses) and lock["acquisitions"]:
            lock["misses"] = sum(misses)
            lock["misses_per_cs"] = lock["misses"] / lock["acquisitions"]
        else:
            lock["misses"] = None
            lock["misses_per_cs"] = None
        wh, hh = [0] * NBUCKETS, [0] * NBUCKETS
        if "wait_hist" in s and "hold_hist" in s:
            wh, hh = _add_hist(wh, s["wait_hist"]), _add_hist(hh, s["hold_hist"])
        else:
            for i in insts:
                wh, hh = _add_hist(wh, i["wait_hist"]), _add_hist(hh, i["hold_hist"])
        _stats(lock, wh, hh)
        lock["types"] = sorted({i.get("type") for i in insts if i.get("type")})
        lock["call_sites"] = _merge_call_sites([s["call_sites"]] if "call_sites" in s
                                               else [i.get("call_sites", []) for i in insts])
        lock["instances"] = sorted(per, key=lambda p: (-p["cs_share"], -p["acquisitions"], str(p["addr"])))
        locks.append(lock)
    locks.sort(key=lambda lk: (-lk["cs_share"], -lk["acquisitions"], lk["id"]))
    total = sum(lk["wait_ns"] + lk["hold_ns"] for lk in locks)
    return {
        "program": raw.get("program"), "argv": raw.get("argv"), "pid": raw.get("pid"),
        "lock": raw.get("lock", "glibc"),
        "wall_ns": wall_ns, "thread_ns": thread_ns, "threads": raw["threads"], "cpus": raw["cpus"],
        "cs_share": min(1.0, total / thread_ns) if thread_ns > 0 else 0.0,
        "misses_available": avail, "misses_reason": raw.get("misses_reason"),
        "time_every": int(raw.get("time_every", 1)),
        "exit": raw.get("exit"),
        "to_glibc": to_glibc(raw),
        "locks": locks,
    }


GLIBC_REASONS = ("process_shared", "robust", "prio_inherit", "prio_protect", "config", "setup", "no_memory")


def to_glibc(raw):
    """The objects the runtime left to glibc, unmeasured (docs/profile.md):
    {mutexes, conds, sems: totals; reasons: {reason: count} summed over the
    kinds; by_kind: the raw per-kind counts}.  A dump without the field
    (older runtime) gives zeros."""
    src = raw.get("to_glibc") or {}
    by_kind = {k: {r: int(v) for r, v in (src.get(k) or {}).items() if int(v)} for k in ("mutexes", "conds", "sems")}
    reasons = {}
    for counts in by_kind.values():
        for r, v in counts.items():
            reasons[r] = reasons.get(r, 0) + v
    order = {r: i for i, r in enumerate(GLIBC_REASONS)}
    reasons = dict(sorted(reasons.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
    out = {k: sum(v.values()) for k, v in by_kind.items()}
    out["reasons"] = reasons
    out["by_kind"] = by_kind
    return out
