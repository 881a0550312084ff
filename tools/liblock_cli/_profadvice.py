"""Advice of `liblock profile`: what to run each lock on, and why.

The method of J.-P. Lozi, "Towards More Scalable Mutual Exclusion for
Multicore Architectures", PhD thesis, UPMC (Paris 6), 2014, sections 4.2.1
and 5.3.1: two thresholds
on a lock's share of thread time spent in its critical sections (including
acquire and release), calibrated with the lockbench microbenchmark on the
machine itself (`liblock profile --calibrate`, _profcalib.py):

  lower  the share at which glibc's mutex (posix) collapses: below it no
         algorithm is likely to help;
  upper  the share above which RCL beat every other lock: above it, delegate.

Rules (docs/profile.md, "Advice"), for a lock with share s:
  s < lower                  keep glibc's mutex;
  s >= upper                 delegate: `liblock transform` its call sites, then
                             run it on rcl (`liblock run --config`);
  between                    misses/CS >= 5 (when the kernel gives them): delegate
                             (locality gain, the thesis's Memcached/Set);
                             threads > CPUs: the lock that did best with more
                             threads than CPUs in calibration (best_oversubscribed,
                             waiters parking); keep when none beat posix;
                             otherwise the local lock that did best in the
                             calibration's collapsed region (a queue lock), with a
                             combining lock as the option after transform.
"""
import datetime
import json
import os

FORMAT = "liblock-thresholds/1"
DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_thresholds_default.json")
MISSES_HIGH = 5.0          # thesis section 8.3: under 5 misses per CS counted as good locality
MALTHUSIAN = ("mcscr", "spin-then-park")  # for thresholds files without best_oversubscribed
COMBINING = "cc-synch"
MAX_NAMED_CALL_SITES = 4


class ThresholdError(Exception):
    pass


def cache_path():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "liblock", "thresholds.json")


def check_thresholds(th, where):
    if not isinstance(th, dict) or th.get("format") != FORMAT:
        raise ThresholdError(f"{where}: not a thresholds file (format {FORMAT})")
    lo, up = th.get("lower"), th.get("upper")
    if not isinstance(lo, (int, float)) or isinstance(lo, bool) or not 0 < lo <= 1:
        raise ThresholdError(f"{where}: 'lower' must be a share in (0, 1]")
    if up is not None and (not isinstance(up, (int, float)) or isinstance(up, bool) or not lo <= up <= 1):
        raise ThresholdError(f"{where}: 'upper' must be null or a share in [lower, 1]")
    if not isinstance(th.get("best_local", "mcs"), str):
        raise ThresholdError(f"{where}: 'best_local' must be an algorithm name")
    return th


def load_thresholds(path=None):
    """--thresholds FILE, else the user's calibration in the cache directory,
    else the defaults shipped with liblock (calibrated on the development
    machine, docs/profile.md).  Returns (thresholds, where they came from)."""
    if path:
        try:
            with open(path) as f:
                th = json.load(f)
        except OSError as e:
            raise ThresholdError(f"{path}: {e.strerror}")
        except json.JSONDecodeError as e:
            raise ThresholdError(f"{path}: not JSON ({e.msg} at line {e.lineno})")
        return check_thresholds(th, path), path
    cp = cache_path()
    if os.path.exists(cp):
        try:
            with open(cp) as f:
                return check_thresholds(json.load(f), cp), cp
        except (OSError, json.JSONDecodeError, ThresholdError) as e:
            raise ThresholdError(f"{cp}: unusable ({e}); rerun `liblock profile --calibrate` or remove it")
    try:
        with open(DEFAULTS) as f:
            th = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ThresholdError(f"{DEFAULTS}: the shipped defaults are unusable ({e}); give --thresholds FILE")
    return check_thresholds(th, DEFAULTS), "shipped defaults"


def store_thresholds(th, path=None):
    path = path or cache_path()
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(th, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return path


def pct(x):
    if x is None:
        return "n/a"
    p = 100.0 * x
    if p == 0 or p >= 0.1:
        return f"{p:.1f}%"
    return f"{p:.2f}%" if p >= 0.01 else "<0.01%"


def _call_site_list(lock):
    cs = [c["site"] for c in lock.get("call_sites", [])]
    text = ", ".join(cs[:MAX_NAMED_CALL_SITES])
    if len(cs) > MAX_NAMED_CALL_SITES:
        text += f" and {len(cs) - MAX_NAMED_CALL_SITES} more"
    return text or "its call sites"


def advise(lock, report, th, algorithms=None):
    """Advice for one lock of an aggregated report: {action, algorithm, wait,
    reason, transform} with action keep | try | delegate."""
    s, lo, up = lock["cs_share"], th["lower"], th.get("upper")
    share = f"{pct(s)} of thread time in its critical sections"
    up_text = f"the upper threshold {pct(up)}" if up is not None else "no upper threshold (RCL never beat every lock in calibration)"
    misses = lock.get("misses_per_cs")
    threads, cpus = report.get("threads", 0), report.get("cpus", 1)

    def out(action, alg, wait, reason, transform=None):
        return {"action": action, "algorithm": alg, "wait": wait, "reason": reason, "transform": transform}

    def delegate(why):
        sites = [c["site"] for c in lock.get("call_sites", [])]
        return out("delegate", "rcl", None,
                   f"{why}: run `liblock transform` on its critical sections ({_call_site_list(lock)}) and "
                   f"delegate them to an RCL server (`liblock run --config`).", sites)

    if not lock.get("acquisitions"):
        return out("keep", None, None, "never acquired.")
    if s < lo:
        extra = ""
        if misses is not None and misses >= MISSES_HIGH:
            extra = f" ({misses:.1f} misses per critical section, but too little time in them to pay for a server)"
        if th.get("posix_collapsed", True):
            lo_text = f"the lower threshold {pct(lo)} at which glibc's mutex collapses on this machine"
        else:
            lo_text = f"the lower threshold {pct(lo)} up to which glibc's mutex did not collapse in calibration"
        return out("keep", None, None, f"{share}, below {lo_text}: no algorithm is likely to help{extra}.")
    if up is not None and s >= up:
        return delegate(f"{share}, at or above the upper threshold {pct(up)} above which RCL beat every lock "
                        f"in calibration")
    between = f"{share}, between the lower threshold {pct(lo)} and {up_text}"
    if misses is not None and misses >= MISSES_HIGH:
        return delegate(f"{between}, with {misses:.1f} cache misses per critical section (>= {MISSES_HIGH:g}), "
                        f"a locality gain for a server core")
    if threads > cpus:
        if "best_oversubscribed" in th:
            alg, wait = th["best_oversubscribed"], th.get("best_oversubscribed_wait")
        else:  # a thresholds file from before the oversubscribed calibration
            alg, wait = MALTHUSIAN
        if alg == "posix":
            return out("keep", None, None, f"{between}, with {threads} threads on {cpus} CPUs, but no lock beat "
                                           f"glibc's mutex with more threads than CPUs in calibration.")
        return out("try", alg, wait,
                   f"{between}, with {threads} threads on {cpus} CPUs: {alg} did best with more threads than CPUs "
                   f"in calibration; its surplus waiters park (`liblock run`).")
    best = th.get("best_local") or "mcs"
    wait = th.get("best_local_wait")
    if algorithms is not None and best not in algorithms:
        best, wait = "mcs", None
    if best == "posix":
        return out("keep", None, None, f"{between}, but no other local lock beat glibc's mutex in the "
                                       f"calibration's contended region; after `liblock transform` a combining lock "
                                       f"({COMBINING}) may.")
    return out("try", best, wait,
               f"{between}: {best} did best of the local locks where glibc's mutex collapsed in calibration "
               f"(`liblock run`); after `liblock transform`, a combining lock ({COMBINING}) is the next step.")


def advise_all(report, th, algorithms=None):
    for lock in report["locks"]:
        lock["advice"] = advise(lock, report, th, algorithms)
    return report


def config_entries(report):
    """The --advise file's directives: one per lock whose advice is to
    change algorithm."""
    entries = []
    for lk in report["locks"]:
        a = lk.get("advice") or {}
        if a.get("action") not in ("try", "delegate"):
            continue
        where = lk["site"] + (f" in {lk['function']}()" if lk.get("function") else "")
        comments = [f"{where}: {lk['count']} lock(s), {pct(lk['cs_share'])} of thread time in critical sections",
                    f"{a['action']}: {a['reason']}"]
        if a["action"] == "delegate":
            comments.append("rcl speeds up only critical sections transformed into liblock_execute_mutex calls; "
                            "the ids of a rebuilt program differ: profile it again")
        entries.append((comments, lk["id"], a["algorithm"], a.get("wait"), None))
    return entries


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
