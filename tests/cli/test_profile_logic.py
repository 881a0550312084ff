"""`liblock profile`'s pure logic on small synthetic inputs: the raw dump's
checks and aggregation (_profdata.py), the advice at known shares
(_profadvice.py) and the text report's formatting (_profreport.py).  The
command end to end is tests/profile/test_cli.py's."""
import copy
import json
import os
import unittest

import clitest
from liblock_cli import _profadvice, _profdata, _profreport

FIXTURES = os.path.join(clitest.ROOT, "tests", "profile")


def raw_pair():
    with open(os.path.join(FIXTURES, "pair.raw.json")) as f:
        return json.load(f)


def lock(share, misses=None, acq=1000, sites=("a.c:1",)):
    return {"cs_share": share, "misses_per_cs": misses, "acquisitions": acq, "id": "0123456789abcdef",
            "site": "a.c:1", "function": "f", "count": 1, "call_sites": [{"site": s} for s in sites]}


class Data(unittest.TestCase):
    def test_hist_quantile(self):
        h = [0] * _profdata.NBUCKETS
        h[3], h[10] = 90, 10
        self.assertEqual(_profdata.hist_quantile(h, 0.5), 16)       # bucket 3: values < 2**4
        self.assertEqual(_profdata.hist_quantile(h, 0.99), 2048)    # bucket 10
        self.assertIsNone(_profdata.hist_quantile([0] * 4, 0.5))

    def test_check_names_the_problem(self):
        raw = raw_pair()
        _profdata.check(raw)
        for change, want in [(lambda r: r.update(format="x/2"), "format 'x/2' is not liblock-profile-raw/1"),
                             (lambda r: r.pop("wall_ns"), "missing 'wall_ns'"),
                             (lambda r: r.update(threads=-1), "'threads' is negative"),
                             (lambda r: r.update(misses_available=1), "'misses_available' has the wrong type"),
                             (lambda r: r["sites"].append(3), "sites[2]: not an object")]:
            bad = copy.deepcopy(raw)
            change(bad)
            with self.assertRaises(_profdata.DumpError) as cm:
                _profdata.check(bad, "d")
            self.assertIn(want, str(cm.exception))

    def test_aggregate(self):
        raw = raw_pair()
        rep = _profdata.aggregate(raw)
        self.assertEqual(len(rep["locks"]), len(raw["sites"]))
        shares = [lk["cs_share"] for lk in rep["locks"]]
        self.assertEqual(shares, sorted(shares, reverse=True))       # ranked by share of thread time
        top = rep["locks"][0]
        site = next(s for s in raw["sites"] if s["id"] == top["id"])
        insts = site["instances"]
        self.assertEqual(top["acquisitions"], sum(i["acquisitions"] for i in insts))
        self.assertAlmostEqual(top["cs_share"], sum(i["wait_ns"] + i["hold_ns"] for i in insts) / raw["thread_ns"])
        self.assertAlmostEqual(top["wait_mean_ns"], round(top["wait_ns"] / top["acquisitions"], 1))
        if raw["misses_available"]:
            self.assertAlmostEqual(top["misses_per_cs"], sum(i["misses"] for i in insts) / top["acquisitions"])
        total = sum(lk["wait_ns"] + lk["hold_ns"] for lk in rep["locks"])
        self.assertAlmostEqual(rep["cs_share"], min(1.0, total / raw["thread_ns"]))
        self.assertEqual((rep["exit"], rep["lock"]), (raw["exit"], "glibc"))


class Advice(unittest.TestCase):
    th = {"lower": 0.15, "upper": 0.5, "best_local": "mcs", "best_local_wait": None}
    few = {"threads": 2, "cpus": 2}
    many = {"threads": 8, "cpus": 2}

    def test_pct(self):
        self.assertEqual([_profadvice.pct(x) for x in (None, 0, 0.5, 0.0005, 0.00001)],
                         ["n/a", "0.0%", "50.0%", "0.05%", "<0.01%"])

    def test_by_share(self):
        self.assertEqual(_profadvice.advise(lock(0.3, acq=0), self.few, self.th)["action"], "keep")   # never acquired
        self.assertEqual(_profadvice.advise(lock(0.10), self.few, self.th)["action"], "keep")          # below lower
        a = _profadvice.advise(lock(0.60, sites=("a.c:1", "b.c:2")), self.few, self.th)
        self.assertEqual((a["action"], a["algorithm"], a["transform"]), ("delegate", "rcl", ["a.c:1", "b.c:2"]))
        a = _profadvice.advise(lock(0.30), self.few, self.th)
        self.assertEqual((a["action"], a["algorithm"]), ("try", "mcs"))                                 # between

    def test_misses_and_oversubscription(self):
        a = _profadvice.advise(lock(0.30, misses=_profadvice.MISSES_HIGH), self.few, self.th)
        self.assertEqual(a["action"], "delegate")
        a = _profadvice.advise(lock(0.30), self.many, self.th)
        self.assertEqual((a["action"], a["algorithm"], a["wait"]), ("try",) + _profadvice.MALTHUSIAN)
        th = dict(self.th, best_oversubscribed="posix")
        self.assertEqual(_profadvice.advise(lock(0.30), self.many, th)["action"], "keep")
        a = _profadvice.advise(lock(0.30), self.few, dict(self.th, best_local="nosuch"), algorithms={"mcs": {}})
        self.assertEqual(a["algorithm"], "mcs")                                  # an algorithm not built here

    def test_config_entries(self):
        rep = dict(self.few, locks=[lock(0.10), lock(0.30), lock(0.60)])
        _profadvice.advise_all(rep, self.th)
        entries = _profadvice.config_entries(rep)
        self.assertEqual([(e[2], e[1]) for e in entries], [("mcs", "0123456789abcdef"), ("rcl", "0123456789abcdef")])
        self.assertTrue(entries[0][0][0].startswith("a.c:1 in f(): 1 lock(s), 30.0% of thread time"))


class Report(unittest.TestCase):
    def test_formats(self):
        self.assertEqual([_profreport.fmt_ns(x) for x in (None, 512, 1500, 2.5e6, 3e9)],
                         ["-", "512ns", "1.5us", "2.5ms", "3s"])
        self.assertEqual(_profreport.fmt_bound(2048), "<2.05us")
        self.assertEqual([_profreport.fmt_count(n) for n in (999, 150000, 2500000)], ["999", "150k", "2.5M"])

    def test_text_report_lists_the_locks(self):
        rep = _profadvice.advise_all(_profdata.aggregate(raw_pair()), Advice.th)
        text = "\n".join(_profreport.text_report(rep, 10, "test thresholds", Advice.th))
        for lk in rep["locks"]:
            self.assertIn(lk["site"], text)
        self.assertIn("./pair", text)


if __name__ == "__main__":
    unittest.main()
