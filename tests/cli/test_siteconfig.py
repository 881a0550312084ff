"""The Python pre-validation of per-site configuration files
(_siteconfig.py): what a good file parses to, the one-line message of each
kind of bad line, and that what write() produces parses back."""
import os
import tempfile
import unittest

from clitest import ALGORITHMS
from liblock_cli import _siteconfig


class SiteConfig(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def file(self, text):
        path = os.path.join(self.dir.name, "c.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def problem(self, text):
        path = self.file(text)
        with self.assertRaises(_siteconfig.ConfigError) as cm:
            _siteconfig.parse(path, ALGORITHMS)
        msg = str(cm.exception)
        self.assertTrue(msg.startswith(path + ":"), msg)
        return msg[len(path) + 1:]

    def test_good_file(self):
        path = self.file("# a comment\n\ndefault mcs wait=stp  # trailing\n"
                         "site 0123456789abcdef ticket\nsite a.c:12 rcl server=0\nsite my_lock glibc\n")
        self.assertEqual(_siteconfig.parse(path, ALGORITHMS), {
            "default": ("mcs", "stp"),
            "sites": [("0123456789abcdef", "ticket", None, None), ("a.c:12", "rcl", None, 0),
                      ("my_lock", "glibc", None, None)]})

    def test_key_kinds(self):
        self.assertEqual(_siteconfig.key_kind("0123456789ABCDEF"), "id")
        self.assertEqual(_siteconfig.key_kind("dir/x.c:7"), "file:line")
        self.assertEqual(_siteconfig.key_kind("lock_a"), "symbol")
        self.assertIsNone(_siteconfig.key_kind("x.c:0"))
        self.assertIsNone(_siteconfig.key_kind("a b"))

    def test_bad_lines(self):
        cases = [
            ("default mcs\ndefault ticket\n", "2: a second 'default' line (the first is line 1)"),
            ("default\n", "1: 'default' needs an algorithm name"),
            ("site x.c:1\n", "1: 'site' needs a key and an algorithm name"),
            ("site x.c:0 mcs\n", "1: bad site key 'x.c:0'"),
            ("lock x mcs\n", "1: unknown directive 'lock'"),
            ("site a.c:3 nosuch\n", "1: unknown algorithm 'nosuch'"),
            ("site a.c:3 mcs wait\n", "1: bad option 'wait'"),
            ("site a.c:3 mcs wait=spin wait=yield\n", "1: wait= given twice"),
            ("site a.c:3 mcs wait=often\n", "1: unknown waiting policy 'often'"),
            ("site a.c:3 glibc wait=spin\n", "1: wait= does not apply to glibc's mutex"),
            ("site a.c:3 ticket wait=park\n", "1: algorithm 'ticket' does not support waiting policy 'park'"),
            ("default rcl server=0\n", "1: server= applies to a 'site' line only"),
            ("site a.c:3 mcs server=0\n", "1: server= applies to rcl only, not 'mcs'"),
            ("site a.c:3 rcl server=x\n", "1: bad server CPU 'x'"),
            ("site a.c:3 rcl server=100000\n", "1: server CPU 100000 does not exist"),
            (f"site a.c:3 rcl server={os.cpu_count()}\n", f"1: server CPU {os.cpu_count()} does not exist"),
            ("site a.c:3 mcs colour=red\n", "1: unknown option 'colour='"),
        ]
        for text, want in cases:
            with self.subTest(text=text):
                self.assertTrue(self.problem(text).startswith(want), (text, self.problem(text), want))

    def test_validate_without_checker(self):
        self.assertIsNone(_siteconfig.validate(self.file("default mcs\n"), ALGORITHMS))
        self.assertEqual(_siteconfig.validate(self.file("default nosuch\n"), ALGORITHMS).split(": ", 2)[2],
                         "unknown algorithm 'nosuch' (valid: glibc mcs rcl ticket)")
        missing = os.path.join(self.dir.name, "missing")
        self.assertEqual(_siteconfig.validate(missing, ALGORITHMS), f"liblock: {missing}: no such file")
        self.assertEqual(_siteconfig.validate(self.dir.name, ALGORITHMS), f"liblock: {self.dir.name}: not a file")

    def test_written_file_parses_back(self):
        path = os.path.join(self.dir.name, "w.conf")
        _siteconfig.write(path, ["made by a test", ""], [
            (["hot lock"], "0123456789abcdef", "mcs", "spin-then-park", None),
            ([], "a.c:9", "rcl", None, 0)])
        with open(path) as f:
            text = f.read()
        self.assertIn("# made by a test\n#\n", text)
        self.assertIn("# hot lock\nsite 0123456789abcdef mcs wait=spin-then-park\n", text)
        self.assertEqual(_siteconfig.parse(path, ALGORITHMS)["sites"],
                         [("0123456789abcdef", "mcs", "spin-then-park", None), ("a.c:9", "rcl", None, 0)])


if __name__ == "__main__":
    unittest.main()
