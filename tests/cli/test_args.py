"""`liblock`'s argument parsing: each subcommand takes its options and
defaults, bad input is one line and exit status 2, and `liblock malthus` is
the same command as `liblock bench malthus`."""
import contextlib
import io
import sys
import unittest
from unittest import mock

import clitest  # noqa: F401 (the import path)
from liblock_cli import bench, build_parser, oncpu, subcommands, transform


def parse(argv):
    parser, _ = build_parser()
    return parser.parse_args(argv)


def refused(argv):
    """(exit status, stderr) of parsing argv."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parse(argv)
        except SystemExit as e:
            return e.code, err.getvalue()
    return None, err.getvalue()


class Subcommands(unittest.TestCase):
    def test_every_subcommand(self):
        names = [n for n, _ in subcommands()]
        self.assertEqual(names, ["bench", "list", "malthus", "oncpu", "profile", "run", "transform"])
        _, mods = build_parser()
        for n in names:
            self.assertTrue(mods[n].HELP, n)

    def test_unknown_option_is_one_line(self):
        code, err = refused(["bench", "contention", "--no-such-option"])
        self.assertEqual(code, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("--no-such-option", err)

    def test_unknown_command(self):
        code, err = refused(["nosuch"])
        self.assertEqual(code, 2)
        self.assertIn("nosuch", err)


class Run(unittest.TestCase):
    def test_lock_and_program(self):
        a = parse(["run", "--lock", "mcs", "--wait", "spin", "--", "prog", "-x", "1"])
        self.assertEqual((a.command, a.lock, a.wait), ("run", "mcs", "spin"))
        self.assertEqual([x for x in a.program if x != "--"], ["prog", "-x", "1"])


class Oncpu(unittest.TestCase):
    def test_action(self):
        for action in oncpu.ACTIONS:
            self.assertEqual(parse(["oncpu", action]).action, action)

    def test_unknown_action_is_one_line(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = oncpu.run(parse(["oncpu", "lod"]), None)
        self.assertEqual(code, 2)
        self.assertEqual(len(err.getvalue().strip().splitlines()), 1, err.getvalue())
        self.assertIn("'lod'", err.getvalue())

    def test_run_loads_only_as_root_when_not_pinned(self):
        self.assertTrue(oncpu.should_load(0, False, {}))
        self.assertTrue(oncpu.should_load(0, False, {"LIBLOCK_ONCPU": "ebpf"}))
        self.assertFalse(oncpu.should_load(0, True, {}))
        self.assertFalse(oncpu.should_load(1000, False, {}))
        self.assertFalse(oncpu.should_load(0, False, {"LIBLOCK_ONCPU": "fallback"}))
        self.assertFalse(oncpu.should_load(0, False, {"LIBLOCK_ONCPU": "none"}))


class Transform(unittest.TestCase):
    def test_options(self):
        a = parse(["transform", "--out", "d", "f.c", "g.c", "--wrapper", "L:U", "--only", "f.c:3", "h"])
        self.assertEqual((a.out, a.files, a.wrapper, a.only), ("d", ["f.c", "g.c"], ["L:U"], ["f.c:3", "h"]))

    def test_compiler_flags_after_dashes(self):
        argv = ["transform", "f.c", "--", "-DX", "-Iinc"]
        a = parse(argv)
        with mock.patch.object(sys, "argv", ["liblock"] + argv):
            self.assertEqual(transform.split_flags(a), (["f.c"], ["-DX", "-Iinc"]))
        with mock.patch.object(sys, "argv", ["liblock", "transform", "f.c"]):
            self.assertEqual(transform.split_flags(parse(["transform", "f.c"])), (["f.c"], []))

    def test_out_and_in_place_exclusive(self):
        code, err = refused(["transform", "--out", "d", "--in-place", "f.c"])
        self.assertEqual(code, 2)
        self.assertIn("not allowed with", err)


class Bench(unittest.TestCase):
    def test_contention_defaults(self):
        a = parse(["bench", "contention", "--algorithms", "posix,spin", "--reps", "2"])
        self.assertEqual((a.experiment, a.algorithms, a.reps), ("contention", "posix,spin", 2))
        self.assertEqual(a.delays, bench.THESIS_DELAYS)
        self.assertEqual((a.lines, a.baseline, a.regimes), ("1,5", "posix", "44,146"))

    def test_experiments_parse(self):
        for exp in ("contention", "threads", "headline", "latency-map", "store-cas", "null-rpc", "multi-rpc",
                    "cost-model", "oversubscription", "apps", "delegation", "rcl-latency", "startup", "manycore"):
            self.assertEqual(parse(["bench", exp]).experiment, exp)
        self.assertEqual(parse(["bench", "report", "d1", "d2"]).experiment, "report")

    def test_bad_reps_and_regimes(self):
        # refused before anything runs (no environment needed)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(bench.run(parse(["bench", "contention", "--reps", "0"]), None), 2)
            self.assertEqual(bench.run(parse(["bench", "contention", "--regimes", "146,44"]), None), 2)
            self.assertEqual(bench.run(parse(["bench"]), None), 2)
        self.assertIn("--reps must be at least 1", err.getvalue())
        self.assertIn("--regimes must be two increasing numbers", err.getvalue())
        self.assertIn("name an experiment", err.getvalue())

    def test_startup_before_must_exist(self):
        # the dynamic loader only warns about a missing LD_PRELOAD file: the arm would time plain runs
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(bench.run(parse(["bench", "startup", "--before", "/no/such/interposer.so"]), None), 2)
        self.assertIn("--before /no/such/interposer.so: no such file", err.getvalue())


class Malthus(unittest.TestCase):
    def test_bench_malthus_is_liblock_malthus(self):
        for mode in ("table", "sweep"):
            new = vars(parse(["bench", "malthus", mode, "--threads", "4", "--reps", "2"]))
            old = vars(parse(["malthus", mode, "--threads", "4", "--reps", "2"]))
            self.assertEqual((new.pop("command"), new.pop("experiment")), ("bench", "malthus"))
            self.assertEqual(old.pop("command"), "malthus")
            self.assertEqual(new, old)
            self.assertEqual((new["mode"], new["threads"], new["reps"]), (mode, "4", 2))

    def test_sweep_defaults(self):
        a = parse(["bench", "malthus", "sweep"])
        self.assertEqual(a.threads, "1,2,4,8,16,32,64,128,256")

    def test_alias_says_so(self):
        _, mods = build_parser()
        self.assertIn("bench malthus", mods["malthus"].HELP)

    def test_no_mode(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(bench.run(parse(["bench", "malthus"]), None), 2)
        self.assertIn("table or sweep", err.getvalue())


if __name__ == "__main__":
    unittest.main()
