"""The calibrated choices of the `auto` lock (docs/auto.md), from the machine's
lock thresholds (`liblock profile --calibrate`, else the shipped defaults):
what `auto` moves a highly contended lock to with no more threads than CPUs
(LIBLOCK_AUTO_UNDER) and with more (LIBLOCK_AUTO_OVER).  `liblock run` sets them
for the program when it runs under `--lock auto` and they are not set already.

  UNDER: of the calibration's points at its highest contention (its smallest
         delay, CPUs threads), the auto candidate with the fewest cycles per
         critical section; posix counts as ttas (both are barging futex locks).
  OVER:  the calibration's best lock with 4x CPUs threads, if it is a
         candidate (mcs, mcscr, loiter); ttas for posix and for anything else.
"""

# auto's candidates in the order src/locks/adaptive/auto.c numbers them
CANDIDATES = ("ttas", "mcs", "mcscr", "loiter")
AS_CANDIDATE = {"posix": "ttas", "ttas": "ttas", "mcs": "mcs", "mcscr": "mcscr", "loiter": "loiter"}


def choices(th):
    """(under, over, why) from a thresholds dict (format liblock-thresholds/1)."""
    points = [p for p in th.get("points") or [] if p.get("cycles_per_cs") is not None
              and AS_CANDIDATE.get(p.get("algorithm")) in ("ttas", "mcs")]
    under, why_u = "ttas", "no calibration point of ttas, posix or mcs"
    if points:
        d0 = min(p["delay_cycles"] for p in points)
        best = min((p for p in points if p["delay_cycles"] == d0), key=lambda p: p["cycles_per_cs"])
        under = AS_CANDIDATE[best["algorithm"]]
        why_u = f"{best['algorithm']} fewest cycles per critical section at delay {d0}"
    bo = th.get("best_oversubscribed")
    over = AS_CANDIDATE.get(bo, "ttas")
    why_o = f"best with more threads than CPUs: {bo}" if bo else "no oversubscribed calibration"
    return under, over, f"{why_u}; {why_o}"


def auto_env(child_env, load):
    """Set LIBLOCK_AUTO_UNDER/OVER in child_env (unless set) from load() -> (thresholds, source).
    Returns a one-line note, or None when nothing was set."""
    if child_env.get("LIBLOCK_AUTO_UNDER") and child_env.get("LIBLOCK_AUTO_OVER"):
        return None
    try:
        th, source = load()
    except Exception as e:  # a broken thresholds file: auto keeps its own defaults, said so
        return f"liblock run: auto: no calibration ({e}); LIBLOCK_AUTO_UNDER/OVER stay ttas"
    under, over, why = choices(th)
    child_env.setdefault("LIBLOCK_AUTO_UNDER", under)
    child_env.setdefault("LIBLOCK_AUTO_OVER", over)
    return None if (under, over) == ("ttas", "ttas") else \
        f"liblock run: auto: under {under}, over {over} ({why}; from {source})"
