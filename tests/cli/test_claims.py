"""The seeds' ordering claims of the headline (_claims.py): each claim is
reproduced, not reproduced (naming the failing pair) or not measured
(naming the missing algorithm), from medians; and the headline plot draws
one panel per point from a summary (matplotlib; skipped where missing)."""
import os
import tempfile
import unittest

import clitest  # noqa: F401 (the import path)
from liblock_cli import _claims

SEED_ORDER = {"rcl": 300, "cc-synch": 400, "dsm-synch": 420, "mcs": 500, "posix": 1000, "ttas": 700}


def cycles(high5=None, low1=None, low5=None):
    return {("high", 5): dict(high5 if high5 is not None else SEED_ORDER),
            ("low", 1): dict(low1 if low1 is not None else {"rcl": 500, "mcs": 450, "posix": 700, "ttas": 480}),
            ("low", 5): dict(low5 if low5 is not None else {"rcl": 400, "mcs": 450, "posix": 700})}


def by_claim(results, word):
    return next(r for r in results if word in r["claim"])


class Claims(unittest.TestCase):
    def test_all_reproduced(self):
        res = _claims.check(cycles())
        self.assertEqual([r["verdict"] for r in res], ["reproduced"] * 3)
        self.assertTrue(all(r["why"] == "" for r in res))
        self.assertEqual(by_claim(res, "high contention")["measured"],
                         "rcl 300 < cc-synch 400 < dsm-synch 420 < mcs 500 < posix 1000")

    def test_order_broken_names_the_pair(self):
        res = by_claim(_claims.check(cycles(high5=dict(SEED_ORDER, rcl=410))), "high contention")
        self.assertEqual(res["verdict"], "not reproduced")
        self.assertEqual(res["why"], "rcl 410 >= cc-synch 400")
        res = by_claim(_claims.check(cycles(high5=dict(SEED_ORDER, mcs=1100))), "high contention")
        self.assertEqual(res["why"], "mcs 1100 >= posix 1000")

    def test_same_group_members_need_no_order(self):  # cc-synch and dsm-synch may come in either order
        res = by_claim(_claims.check(cycles(high5=dict(SEED_ORDER, **{"dsm-synch": 350}))), "high contention")
        self.assertEqual(res["verdict"], "reproduced")

    def test_match_and_best(self):
        res = _claims.check(cycles(low1={"rcl": 1500, "mcs": 450, "posix": 700, "ttas": 480},
                                   low5={"rcl": 41000, "oyama": 550, "posix": 900}))
        m, b = by_claim(res, "matches"), by_claim(res, "best")
        self.assertEqual(m["verdict"], "not reproduced")
        self.assertIn("3.12x", m["why"])
        self.assertEqual(b["verdict"], "not reproduced")
        self.assertEqual(b["why"], "oyama 550 < rcl 41000")
        self.assertIn("rank 3 of 3", b["measured"])
        self.assertTrue(m["two_cpus"] and b["two_cpus"])

    def test_missing_algorithm_is_not_measured(self):
        hi = dict(SEED_ORDER)
        del hi["dsm-synch"]
        res = _claims.check(cycles(high5=hi, low5={"mcs": 450}))
        self.assertEqual(by_claim(res, "high contention")["verdict"], "not measured")
        self.assertIn("dsm-synch", by_claim(res, "high contention")["why"])
        self.assertEqual(by_claim(res, "best")["verdict"], "not measured")

    def test_from_summary_one_regime(self):
        summary = [dict(regime="normal", n="5", delay_cycles="100", lines="5", algorithm="rcl",
                        lat_cycles_mean_median="300"),
                   dict(regime="slow", n="5", delay_cycles="100", lines="5", algorithm="mcs",
                        lat_cycles_mean_median="9"),
                   dict(regime="normal", n="0", delay_cycles="2000000", lines="1", algorithm="mcs",
                        lat_cycles_mean_median="")]
        self.assertEqual(_claims.cycles_from_summary(summary, "normal"), {("high", 5): {"rcl": 300.0}})


class Plot(unittest.TestCase):
    def test_four_panels_written(self):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            self.skipTest("matplotlib is not installed")
        from liblock_cli import _plots_headline
        sel = []
        for (dl, k) in _plots_headline.POINTS:
            for a, v in SEED_ORDER.items():
                sel.append(dict(regime="normal", n="5", delay_cycles=str(dl), lines=str(k), algorithm=a,
                                lat_cycles_mean_median=str(v), ratio_vs_posix=str(v / 1000)))
        with tempfile.TemporaryDirectory() as d:
            f = _plots_headline.headline_plot(plt, sel, list(SEED_ORDER), "posix", d, "test")
            self.assertEqual(f, os.path.join(d, "headline.png"))
            with open(f, "rb") as fh:
                self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertIsNone(_plots_headline.headline_plot(plt, [], list(SEED_ORDER), "posix", d, "test"))


if __name__ == "__main__":
    unittest.main()
