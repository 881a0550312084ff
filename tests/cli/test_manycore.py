"""`liblock bench manycore`'s budget model (_manycore.plan): within 480 s on
2, 16, 64 and 224 CPUs with every algorithm of src/locks, built memcached
trees or not; thread and worker counts on logarithmic ladders from 2 (1) to
N (N-1); every algorithm at every contention point, both delays, both line
counts; what was cut is said; the memcached part's missing tools are named
in one line; the command's options parse."""
import glob
import math
import os
import unittest
from unittest import mock

import clitest
from liblock_cli import _manycore, build_parser


def all_algorithms():
    """Every registered algorithm: the registry is the file names of
    src/locks/*/NAME.c (the Makefile's rule), so no build is needed."""
    return sorted(os.path.basename(f)[:-2] for f in glob.glob(os.path.join(clitest.ROOT, "src", "locks", "*", "*.c")))


def is_log_ladder(xs, lo, hi):
    """lo, then points a constant factor >= 2 apart, hi last (at least 1.5x past the point before it)."""
    if xs[0] != lo or xs[-1] != hi or xs != sorted(set(xs)):
        return False
    if len(xs) == 1:
        return lo == hi
    if len(xs) == 2:
        return hi / lo >= 1.5
    steps = {xs[i + 1] / xs[i] for i in range(len(xs) - 2)}
    return len(steps) == 1 and min(steps) >= 2 and hi / xs[-2] >= 1.5


class Plan(unittest.TestCase):
    def setUp(self):
        self.algos = all_algorithms()
        self.assertGreaterEqual(len(self.algos), 10, self.algos)
        self.assertIn("rcl", self.algos)

    def test_within_eight_minutes(self):
        for n in (2, 16, 64, 224):
            for built in (False, True):
                p = _manycore.plan(n, self.algos, built=built)
                self.assertTrue(p["fits"], (n, built, p["total_s"]))
                self.assertLessEqual(p["total_s"], 480, (n, built))
                self.assertAlmostEqual(p["total_s"], sum(c["est_s"] for c in p["cells"]), delta=0.5)

    def test_ladders_and_every_algorithm(self):
        for n in (2, 16, 64, 224):
            p = _manycore.plan(n, self.algos)
            con = [c for c in p["cells"] if c["part"] == "contention"]
            threads = sorted({c["threads"] for c in con})
            self.assertTrue(is_log_ladder(threads, 2, n), (n, threads))
            for t in threads:
                pts = {(c["delay_cycles"], c["lines"]) for c in con if c["threads"] == t}
                self.assertEqual(pts, {(100, 1), (100, 5), (2000000, 1), (2000000, 5)}, (n, t))
            for c in con:
                self.assertEqual(c["algorithms"], self.algos)
                self.assertEqual(c["runs"], len(self.algos) * c["reps"])
                self.assertGreaterEqual(c["reps"], 2)     # every cell repeated
            mc = [c for c in p["cells"] if c["part"] == "memcached"]
            workers = [c["workers"] for c in mc]
            self.assertTrue(is_log_ladder(workers, 1, n - 1), (n, workers))
            for c in mc:
                self.assertEqual(c["configs"], ["glibc", "best", "tr-rcl"])
                self.assertEqual(c["clients"], 2 * c["workers"])
                self.assertGreaterEqual(c["reps"], 2)
            self.assertEqual([c["part"] for c in p["cells"]][0], "prepare")
            self.assertEqual([c["part"] for c in p["cells"]][-1], "final")

    def test_cuts_are_said(self):
        p = _manycore.plan(2, self.algos)
        self.assertEqual(p["cuts"], [])               # 2 CPUs: everything at the most generous setting
        s = p["settings"]["contention"]
        self.assertEqual((s["reps"], s["x"]), (5, 0.3))
        p = _manycore.plan(224, self.algos)
        self.assertTrue(any(c.startswith("contention: repetitions 5 -> ") for c in p["cuts"]), p["cuts"])
        self.assertTrue(any(c.startswith("memcached: ") for c in p["cuts"]), p["cuts"])
        text = _manycore.format_plan(p)
        self.assertIn("total: ", text)
        self.assertIn("cut to fit: contention:", text)
        # the settings named are the ones in the cells
        con = [c for c in p["cells"] if c["part"] == "contention"]
        self.assertEqual({(c["reps"], c["duration_s"]) for c in con},
                         {(p["settings"]["contention"]["reps"], p["settings"]["contention"]["x"])})

    def test_short_budget_and_options(self):
        p = _manycore.plan(2, ["posix", "mcs", "rcl"], budget=40, built=True)
        self.assertTrue(p["fits"])
        self.assertLessEqual(p["total_s"], 40)
        p = _manycore.plan(2, ["posix"], budget=30, memcached=False)
        self.assertEqual({c["part"] for c in p["cells"]}, {"contention", "final"})
        p = _manycore.plan(16, ["posix", "mcs"], max_reps=2, max_duration=0.1)
        self.assertTrue(all(c["reps"] <= 2 for c in p["cells"] if "reps" in c))
        self.assertTrue(all(c["duration_s"] <= 0.1 for c in p["cells"] if c["part"] == "contention"))
        self.assertFalse(_manycore.plan(224, self.algos, budget=60)["fits"])   # said, not hidden
        with self.assertRaises(ValueError):
            _manycore.plan(1, self.algos)

    def test_deterministic(self):
        self.assertEqual(_manycore.plan(64, self.algos), _manycore.plan(64, self.algos))

    def test_ladder(self):
        self.assertEqual(_manycore.ladder(2, 224), [2, 4, 8, 16, 32, 64, 128, 224])
        self.assertEqual(_manycore.ladder(2, 224, 4), [2, 8, 32, 128, 224])
        self.assertEqual(_manycore.ladder(1, 15), [1, 2, 4, 8, 15])
        self.assertEqual(_manycore.ladder(2, 2), [2])
        self.assertEqual(_manycore.ladder(1, 1), [1])
        self.assertEqual(_manycore.ladder(2, 130), [2, 4, 8, 16, 32, 64, 130])   # not 128 and 130

    def test_cost_model(self):
        self.assertGreater(_manycore.lockbench_run_s(224, 0.1), _manycore.lockbench_run_s(2, 0.1))
        self.assertEqual(_manycore.work_of(1.0), (10000, 30000))      # the thesis's counts
        self.assertLess(_manycore.memcached_run_s(8, 0.1), _manycore.memcached_run_s(8, 1.0))
        self.assertTrue(math.isfinite(_manycore.memcached_run_s(223, 1 / 30)))


class RunTime(unittest.TestCase):
    def test_guard(self):
        now = [100.0]
        may_run = _manycore.guard(110.0, lambda t: t / 10, clock=lambda: now[0])
        self.assertTrue(may_run(50))       # ends at 105
        self.assertTrue(may_run(100))      # ends at 110, the deadline
        self.assertFalse(may_run(101))
        now[0] = 109.5
        self.assertFalse(may_run(10))

    def test_pick_best(self):
        reg = {"posix": {"properties": []}, "mcs": {"properties": ["fifo"]}, "rcl": {"properties": ["delegates"]}}
        def s(a, t, k, v, dl=100):
            return {"algorithm": a, "threads": t, "lines": k, "delay_cycles": dl, "regime": "normal", "n": 3,
                    "lat_cycles_mean_median": v}
        summ = [s("posix", 8, 1, 100), s("posix", 8, 5, 900), s("mcs", 8, 1, 200), s("mcs", 8, 5, 300),
                s("rcl", 8, 1, 10), s("rcl", 8, 5, 10),                    # delegating: never the best classic lock
                s("posix", 2, 1, 1), s("posix", 2, 5, 1),                  # not the largest thread count
                s("mcs", 8, 1, 1, dl=2000000)]                             # not high contention
        self.assertEqual(_manycore.pick_best("auto", summ, "normal", ["posix", "mcs", "rcl"], reg)[0], "mcs")
        self.assertEqual(_manycore.pick_best("ttas", summ, "normal", ["posix"], reg), ("ttas", "--best"))
        self.assertEqual(_manycore.pick_best("auto", [], None, ["rcl"], reg)[0], "mcs")


class MemcachedTools(unittest.TestCase):
    def args(self):
        return build_parser()[0].parse_args(["bench", "manycore", "--profile", __file__])

    def test_memcslap_missing_is_one_line(self):
        with mock.patch.object(_manycore.shutil, "which", lambda name: None):
            why = _manycore.memcached_unavailable(self.args(), None, True)
        self.assertIn("memcslap", why)
        self.assertEqual(len(why.splitlines()), 1)

    def test_built_needs_nothing_else(self):
        with mock.patch.object(_manycore.shutil, "which", lambda name: "/usr/bin/" + name):
            self.assertIsNone(_manycore.memcached_unavailable(self.args(), None, True))

    def test_profile_missing(self):
        a = self.args()
        a.profile = "/nonexistent/profile.json"
        with mock.patch.object(_manycore.shutil, "which", lambda name: "/usr/bin/" + name):
            self.assertIn("no profile", _manycore.memcached_unavailable(a, None, True))


class Options(unittest.TestCase):
    def test_defaults(self):
        a = build_parser()[0].parse_args(["bench", "manycore"])
        self.assertEqual((a.experiment, a.budget, a.plan, a.reps, a.duration, a.best, a.no_memcached, a.timeout),
                         ("manycore", 480.0, None, 5, 0.3, "auto", False, 5.0))
        a = build_parser()[0].parse_args(["bench", "manycore", "--plan", "16", "--budget", "40", "--no-memcached",
                                          "--algorithms", "posix,mcs"])
        self.assertEqual((a.plan, a.budget, a.no_memcached, a.algorithms), (16, 40.0, True, "posix,mcs"))


if __name__ == "__main__":
    unittest.main()
