"""The bench harness's pure logic (_runner.py): probe regimes, the run
order, medians and ratios within a regime, what a killed program leaves,
CSV output; and the apps hand-off bound's verdict (_apps_bound.py)."""
import csv
import os
import tempfile
import unittest

import clitest  # noqa: F401 (the import path)
from liblock_cli import _apps_bound, _runner


class Regimes(unittest.TestCase):
    def test_regime_of(self):
        self.assertEqual([_runner.regime_of(x) for x in (None, 0, 10, 44, 100, 146, 500)],
                         ["none", "none", "fast", "normal", "normal", "slow", "slow"])
        self.assertEqual(_runner.regime_of(50, (60, 70)), "fast")

    def test_classify(self):
        r = _runner.classify({"probe_before_ns": 100, "probe_after_ns": 121}, 1.5, (44, 146))
        self.assertEqual((r["probe_ns"], r["probe_agree"], r["regime"]), (110.0, 1, "normal"))
        r = _runner.classify({"probe_before_ns": 40, "probe_after_ns": 50}, 1.5, (44, 146))
        self.assertEqual((r["probe_agree"], r["regime"]), (0, "mixed"))   # two regimes
        r = _runner.classify({"probe_before_ns": 50, "probe_after_ns": 100}, 1.5, (44, 146))
        self.assertEqual((r["probe_agree"], r["regime"]), (0, "mixed"))   # factor 2 > 1.5
        r = _runner.classify({"probe_before_ns": ""}, 1.5, (44, 146))
        self.assertEqual((r["probe_ns"], r["probe_agree"], r["regime"]), ("", 1, "none"))


class Lists(unittest.TestCase):
    def test_parse_list(self):
        self.assertEqual(_runner.parse_list("100, 1e4,"), [100.0, 1e4])
        self.assertEqual(_runner.parse_list("1,2.0,3e1", int), [1, 2, 30])
        with self.assertRaises(SystemExit) as cm:
            _runner.parse_list("1,x", name="delays")
        self.assertIn("bad delays '1,x'", str(cm.exception))
        with self.assertRaises(SystemExit):
            _runner.parse_list(",")

    def test_interleave_rotates(self):
        order = _runner.interleave([1, 2], ["a", "b", "c"], 2)
        self.assertEqual(order[:3], [(0, 1, "a"), (0, 1, "b"), (0, 1, "c")])
        self.assertEqual(order[6:9], [(1, 1, "b"), (1, 1, "c"), (1, 1, "a")])
        self.assertEqual(len(order), 12)

    def test_fmt_secs(self):
        self.assertEqual([_runner.fmt_secs(s) for s in (0.4, 59.6, 61, 3600)], ["0s", "1m00s", "1m01s", "60m00s"])


class Summaries(unittest.TestCase):
    def test_med_min_max(self):
        self.assertEqual(_runner.med_min_max([3, None, 1, float("nan"), 2]), (2, 1, 3))
        self.assertEqual(_runner.med_min_max([None]), (None, None, None))

    def rows(self):
        ok = {"status": "ok", "probe_agree": 1, "regime": "normal", "probe_ns": 100}
        return [dict(ok, algorithm="posix", d=1, tput=100), dict(ok, algorithm="posix", d=1, tput=300),
                dict(ok, algorithm="posix", d=1, tput=200),
                dict(ok, algorithm="mcs", d=1, tput=500), dict(ok, algorithm="mcs", d=1, tput=700),
                dict(ok, algorithm="mcs", d=1, probe_agree=0, tput=1e9),          # left out: probes disagree
                {"status": "timeout", "algorithm": "ttas", "d": 1}]

    def test_medians_and_ratio(self):
        out = {s["algorithm"]: s for s in _runner.summarise(self.rows(), ["d"], ["tput"], "posix", "tput")}
        self.assertEqual((out["posix"]["n"], out["posix"]["tput_median"], out["posix"]["tput_min"],
                          out["posix"]["tput_max"]), (3, 200, 100, 300))
        self.assertEqual((out["mcs"]["n"], out["mcs"]["tput_median"]), (2, 600))
        self.assertEqual(out["mcs"]["ratio_vs_posix"], 3.0)
        self.assertEqual(out["posix"]["ratio_vs_posix"], 1.0)
        self.assertEqual(out["mcs"]["excluded"], "probe-disagree")
        self.assertEqual((out["ttas"]["n"], out["ttas"]["excluded"]), (0, "timeout"))

    def test_ratio_within_regime_only(self):
        rows = self.rows()
        for r in rows:
            if r["algorithm"] == "posix":
                r["regime"] = "fast"
        out = {s["algorithm"]: s for s in _runner.summarise(rows, ["d"], ["tput"], "posix", "tput")}
        self.assertEqual(out["mcs"]["ratio_vs_posix"], "")   # no posix run in mcs's regime

    def test_dominant_regime(self):
        rows = [{"status": "ok", "probe_agree": 1, "regime": "fast"}] * 2 + \
               [{"status": "ok", "probe_agree": 1, "regime": "slow"}] * 3 + \
               [{"status": "timeout", "probe_agree": 1, "regime": "fast"}] * 5
        self.assertEqual(_runner.dominant_regime(rows), "slow")
        self.assertIsNone(_runner.dominant_regime([]))


class Programs(unittest.TestCase):
    def test_killed_program_keeps_its_output(self):
        # a program killed by the outer bound: what it printed before is kept
        # (its records, and its last stderr line in the timeout record's error)
        cmd = ["sh", "-c", 'echo "{\\"status\\": \\"ok\\", \\"n\\": 1}"; echo "stuck in stage teardown" >&2; '
                           'exec sleep 30']
        recs = _runner.run_program(cmd, 1)
        self.assertEqual(len(recs), 2)
        self.assertEqual(recs[0], {"status": "ok", "n": 1})
        self.assertEqual(recs[1]["status"], "timeout")
        self.assertIn("stuck in stage teardown", recs[1]["error"])

    def test_records_and_errors(self):
        recs = _runner.run_program(["sh", "-c", 'echo noise; echo "{\\"a\\": 1}"; echo "{bad"; echo "{\\"b\\": 2}"'], 10)
        self.assertEqual(recs, [{"a": 1}, {"b": 2}])
        recs = _runner.run_program(["sh", "-c", "echo first >&2; echo last words >&2; exit 3"], 10)
        self.assertEqual(recs, [{"status": "error", "error": "exit 3: last words", "check": "skipped"}])

    def test_write_csv(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.csv")
            _runner.write_csv(path, [{"b": 1, "a": [1, 2]}, {"c": "x"}], first=["a"])
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
        self.assertEqual(rows, [["a", "b", "c"], ["[1, 2]", "1", ""], ["", "", "x"]])


class AppsBound(unittest.TestCase):
    # the hand-off bound's verdict: the time the lock adds per acquisition,
    # not the program's own work
    @staticmethod
    def row(s, g):
        return {"seconds": str(s), "glibc_seconds": str(g), "acquisitions": "20000", "wake_ns": "5000"}

    def test_verdict(self):
        self.assertEqual(_apps_bound.verdict(self.row(0.30, 0.10))[2], 1)   # adds exactly 2 W per acquisition
        self.assertEqual(_apps_bound.verdict(self.row(0.32, 0.10))[2], 0)   # adds 2.2 W
        self.assertEqual(_apps_bound.verdict(self.row(0.30, 0.29))[2], 1)   # 15 us per acquisition, glibc's too
        self.assertEqual(_apps_bound.verdict({"seconds": "0.3"}), (None, None, None))

    def test_parse_counts(self):
        err = ("noise\nlockcount: mutex_lock 10 trylock_ok 2\n"
               "lockcount: mutex_lock 100 trylock_ok 5 cond_waits 3 sem_waits 1\nlockcount: mutex_lock x\n")
        self.assertEqual(_apps_bound.parse_counts(err),
                         (109, {"mutex_lock": 100, "trylock_ok": 5, "cond_waits": 3, "sem_waits": 1}))
        self.assertIsNone(_apps_bound.parse_counts("no counts\n"))


if __name__ == "__main__":
    unittest.main()
