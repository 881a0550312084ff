"""The identity section's reduction (tools/liblock_cli/_identity_bench.py)."""
import os
import statistics
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from liblock_cli import _identity_bench  # noqa: E402


def runs(algo, pairs):
    out = []
    for rep, (off, on) in enumerate(pairs):
        out += [{"rep": str(rep), "algorithm": algo, "identity": "0", "policy": "spin-then-park", "throughput": str(off)},
                {"rep": str(rep), "algorithm": algo, "identity": "1", "policy": "spin-then-park", "throughput": str(on)}]
    return out


class Reduce(unittest.TestCase):
    def test_ratio_is_the_median_of_per_round_ratios(self):
        # round ratios 0.5, 0.9, 0.8: median 0.8, not the ratio of the medians (8e6 / 10e6)
        cols, rows = _identity_bench.reduce(runs("rcl", [(10e6, 5e6), (20e6, 18e6), (10e6, 8e6)]), ["rcl"],
                                            statistics.median)
        (r,) = rows
        self.assertAlmostEqual(r["ratio"], 0.8)
        self.assertEqual((r["ratio_min"], r["ratio_max"], r["rounds"]), (0.5, 0.9, 3))
        self.assertAlmostEqual(r["added_ns"], 1e9 / 8e6 - 1e9 / 10e6)
        self.assertEqual(set(cols), set(r))

    def test_a_missing_algorithm_fails(self):
        with self.assertRaises(_identity_bench.IdentityError):
            _identity_bench.reduce(runs("rcl", [(1, 1)]), ["rcl", "oyama"], statistics.median)

    def test_an_incomplete_round_is_not_a_ratio(self):
        rs = runs("oyama", [(10, 9)]) + [{"rep": "1", "algorithm": "oyama", "identity": "0", "policy": "",
                                          "throughput": "100"}]
        _, (r,) = _identity_bench.reduce(rs, ["oyama"], statistics.median)
        self.assertEqual(r["rounds"], 1)
        self.assertAlmostEqual(r["ratio"], 0.9)


if __name__ == "__main__":
    unittest.main()
