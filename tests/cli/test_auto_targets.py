"""The targets of `liblock bench auto` from its runs (tools/liblock_cli/_auto_targets.py)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from liblock_cli import _auto_targets as T  # noqa: E402


def run(rep, algo, thr, status="ok", prog="p", t=8):
    return {"rep": rep, "program": prog, "threads": t, "algorithm": algo, "status": status, "throughput": thr}


def rounds(per_round):
    """rows from [{algo: throughput or (status, None)}] one dict per round"""
    rows = []
    for rep, d in enumerate(per_round):
        for a, v in d.items():
            rows.append(run(rep, a, None, v[0]) if isinstance(v, tuple) else run(rep, a, v))
    return rows


class Targets(unittest.TestCase):
    def summary(self, per_round, fixed=("ttas", "mcs")):
        return T.summarise(rounds(per_round), [("p", 8)], list(fixed))[0]

    def test_ratios_are_within_each_round(self):
        # glibc moves 2x between rounds; ratios are taken against the same round's glibc
        s = self.summary([{"glibc": 100, "auto": 150, "ttas": 200, "mcs": 50},
                          {"glibc": 200, "auto": 300, "ttas": 400, "mcs": 100},
                          {"glibc": 100, "auto": 140, "ttas": 200, "mcs": 50}])
        self.assertAlmostEqual(s["auto_median"], 1.5)
        self.assertEqual(s["best"], "ttas")
        self.assertAlmostEqual(s["best_median"], 2.0)
        self.assertAlmostEqual(s["auto_vs_best_median"], 0.75)
        self.assertEqual(s["target_best"], "MISSES")
        self.assertEqual(s["target_glibc"], "meets")
        self.assertEqual(s["target_gain"], "meets")  # best >= 1.3 and auto >= 1.2

    def test_the_best_is_chosen_by_its_median_not_its_best_round(self):
        s = self.summary([{"glibc": 100, "auto": 105, "ttas": 110, "mcs": 500},
                          {"glibc": 100, "auto": 105, "ttas": 110, "mcs": 10},
                          {"glibc": 100, "auto": 105, "ttas": 110, "mcs": 10}])
        self.assertEqual(s["best"], "ttas")
        self.assertAlmostEqual(s["auto_vs_best_median"], 105 / 110)
        self.assertEqual(s["target_best"], "meets")
        self.assertEqual(s["target_gain"], "n/a")

    def test_a_run_past_its_bound_counts_as_zero(self):
        s = self.summary([{"glibc": 100, "auto": ("bound", None), "ttas": 100, "mcs": 100},
                          {"glibc": 100, "auto": ("skipped", None), "ttas": 100, "mcs": 100},
                          {"glibc": 100, "auto": 100, "ttas": 100, "mcs": 100}])
        self.assertEqual(s["auto_median"], 0.0)
        self.assertEqual(s["auto_max"], 1.0)
        self.assertEqual(s["target_best"], "MISSES")
        self.assertEqual(s["target_glibc"], "meets")  # its best round reaches glibc: within the spread

    def test_below_glibc_in_every_round_misses(self):
        s = self.summary([{"glibc": 100, "auto": 90, "ttas": 80, "mcs": 70},
                          {"glibc": 100, "auto": 95, "ttas": 80, "mcs": 70}])
        self.assertEqual(s["target_glibc"], "MISSES")
        self.assertEqual(s["target_best"], "meets")

    def test_a_failed_auto_run_misses_everything(self):
        s = self.summary([{"glibc": 100, "auto": ("failed", None), "ttas": 100, "mcs": 100},
                          {"glibc": 100, "auto": 200, "ttas": 100, "mcs": 100}])
        self.assertEqual(s["auto_failed"], 1)
        self.assertTrue(all(s[k].startswith("MISSES") for k in ("target_best", "target_glibc", "target_gain")))

    def test_a_round_without_glibc_is_left_out(self):
        s = self.summary([{"glibc": ("failed", None), "auto": 1, "ttas": 1000, "mcs": 1},
                          {"glibc": 100, "auto": 100, "ttas": 100, "mcs": 100}])
        self.assertEqual(s["rounds"], 1)
        self.assertAlmostEqual(s["best_median"], 1.0)

    def test_no_auto_runs_is_no_data(self):
        s = self.summary([{"glibc": 100, "ttas": 100, "mcs": 100}])
        self.assertEqual((s["target_best"], s["target_glibc"], s["target_gain"]), ("no data",) * 3)


if __name__ == "__main__":
    unittest.main()
