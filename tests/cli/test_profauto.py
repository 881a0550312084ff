"""auto's switch log on the profiler's lock sites (tools/liblock_cli/_profauto.py)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from liblock_cli import _profauto  # noqa: E402

LOG = """\
100.000000500 pid 42 lock 0x7f00000010 ttas -> mcs: window 0.61 contended, 4 threads <= 2 CPUs
garbage line
100.250000000 pid 43 lock 0x7f00000010 ttas -> mcscr: another process
101.000000000 pid 42 lock 0x7f00000010 mcs -> ttas: window 0.01 contended
101.500000000 pid 42 lock 0x7f00000990 ttas -> mcs: a lock nobody recorded

"""


def report():
    return {"pid": 42, "locks": [
        {"site": "a.c:3", "instances": [{"lock": "0x7f00000010"}]},
        {"site": "b.c:9", "instances": [{"lock": "0x7f00000500"}, {"lock": None}]}]}


class Log(unittest.TestCase):
    def read(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write(text)
        try:
            return _profauto.read_log(f.name)
        finally:
            os.unlink(f.name)

    def test_lines_parsed_and_others_counted(self):
        sw, skipped = self.read(LOG)
        self.assertEqual(len(sw), 4)
        self.assertEqual(skipped, 1)  # the garbage line; blank lines are not counted
        self.assertEqual(sw[0], {"t_ns": 100000000500, "pid": 42, "lock": 0x7f00000010, "from": "ttas", "to": "mcs",
                                 "why": "window 0.61 contended, 4 threads <= 2 CPUs"})

    def test_missing_file_is_no_switch(self):
        self.assertEqual(_profauto.read_log("/nonexistent/auto.log"), ([], 0))

    def test_attach_to_the_instance_of_this_process(self):
        sw, _ = self.read(LOG)
        rep = report()
        lost = _profauto.attach(rep, sw, 99_500_000_000)
        self.assertEqual(lost, 1)  # pid 42's switch of an unrecorded lock; pid 43's is not ours
        a = rep["locks"][0]["auto"]
        self.assertEqual([(s["from"], s["to"]) for s in a["switches"]], [("ttas", "mcs"), ("mcs", "ttas")])
        self.assertAlmostEqual(a["switches"][0]["t_s"], 0.5000005)
        self.assertEqual((a["start"], a["final"]), ("ttas", "ttas"))
        self.assertNotIn("auto", rep["locks"][1])

    def test_text_and_timeline(self):
        sw, _ = self.read(LOG)
        rep = report()
        _profauto.attach(rep, sw, 99_500_000_000)
        lk = rep["locks"][0]
        (line,) = _profauto.text_lines(lk)
        self.assertTrue(line.startswith("auto: 2 switch(es), ended on ttas: 0.500 s ttas -> mcs (window 0.61"), line)
        self.assertEqual(_profauto.text_lines(rep["locks"][1]), [])
        ts, ys = _profauto.timeline(lk, 3.0)
        self.assertEqual(ys, [0, 1, 0, 0])
        self.assertEqual((ts[0], ts[-1]), (0.0, 3.0))
        self.assertEqual(len(_profauto.text_lines(lk, limit=1)[0].split("; and 1 more")), 2)


if __name__ == "__main__":
    unittest.main()
