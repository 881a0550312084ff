"""auto's calibrated choices from the lock thresholds (tools/liblock_cli/_autochoice.py)."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from liblock_cli import _autochoice  # noqa: E402

DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "liblock_cli",
                        "_thresholds_default.json")


def pts(**cycles):
    return [{"algorithm": a, "delay_cycles": d, "cycles_per_cs": c} for a, dc in cycles.items() for d, c in dc]


class Choices(unittest.TestCase):
    def test_shipped_defaults_stay_on_ttas(self):
        with open(DEFAULTS) as f:
            th = json.load(f)
        under, over, why = _autochoice.choices(th)
        self.assertEqual((under, over), ("ttas", "ttas"))
        self.assertIn("delay 100", why)

    def test_the_fastest_at_the_highest_contention_wins(self):
        th = {"points": pts(posix=[(100, 400), (1000, 90)], mcs=[(100, 200), (1000, 95)], rcl=[(100, 50)]),
              "best_oversubscribed": "mcscr"}
        self.assertEqual(_autochoice.choices(th)[:2], ("mcs", "mcscr"))   # rcl is no candidate

    def test_posix_counts_as_ttas_and_others_fall_back(self):
        th = {"points": pts(posix=[(100, 100)], mcs=[(100, 200)]), "best_oversubscribed": "lifocr"}
        self.assertEqual(_autochoice.choices(th)[:2], ("ttas", "ttas"))   # lifocr is no candidate
        self.assertEqual(_autochoice.choices({})[:2], ("ttas", "ttas"))
        th["best_oversubscribed"] = "loiter"   # a candidate, with its own place in the node area
        self.assertEqual(_autochoice.choices(th)[:2], ("ttas", "loiter"))

    def test_env_set_by_the_user_wins(self):
        env = {"LIBLOCK_AUTO_UNDER": "mcscr", "LIBLOCK_AUTO_OVER": "mcs"}
        self.assertIsNone(_autochoice.auto_env(env, lambda: ({"best_oversubscribed": "mcscr"}, "x")))
        self.assertEqual(env, {"LIBLOCK_AUTO_UNDER": "mcscr", "LIBLOCK_AUTO_OVER": "mcs"})
        env = {"LIBLOCK_AUTO_UNDER": "mcscr"}
        note = _autochoice.auto_env(env, lambda: ({"points": pts(mcs=[(100, 1)]), "best_oversubscribed": "mcscr"},
                                                  "cache"))
        self.assertEqual(env, {"LIBLOCK_AUTO_UNDER": "mcscr", "LIBLOCK_AUTO_OVER": "mcscr"})
        self.assertIn("from cache", note)

    def test_a_broken_file_is_said_and_changes_nothing(self):
        def boom():
            raise ValueError("thresholds.json: not JSON")
        env = {}
        note = _autochoice.auto_env(env, boom)
        self.assertEqual(env, {})
        self.assertIn("no calibration", note)


if __name__ == "__main__":
    unittest.main()
