"""The BENCHMARKS.md renderer (_report_csv.py, _report_render.py) and the
section reductions of `liblock bench report` that need no benchmark run
(_report_sections.py): CSV with metadata round trip, placeholders, tables
with every algorithm, the run line, and that a missing or bad input is a
clear error that leaves the old report untouched."""
import os
import subprocess
import sys
import tempfile
import unittest

import clitest  # noqa: F401 (the import path)
from liblock_cli import _report_csv, _report_render, _report_sections
from liblock_cli._report_csv import ReportError

META = {"section": "interposer", "commit": "abc1234", "machine": "Test CPU, 2 CPUs, Linux 6.1",
        "date_utc": "2026-11-28 20:00 UTC", "regimes": "ping-pong probe before 66 ns (normal), after 67 ns (normal)",
        "command": "build/bin/interpose_overhead -r 5 -n 1000000", "duration_s": "12", "quick": "0"}
FIELDS = ["algorithm", "policy", "lazy_glibc_ns", "lazy_ns", "lazy_ratio", "engaged_glibc_ns", "engaged_ns",
          "engaged_ratio", "lazy_mt_glibc_ns", "lazy_mt_ns", "lazy_mt_ratio", "engaged_mt_glibc_ns", "engaged_mt_ns",
          "engaged_mt_ratio"]
ROWS = [{"algorithm": "posix", "policy": "park", "lazy_glibc_ns": 4.9, "lazy_ns": 6.23, "lazy_ratio": 1.27,
         "engaged_glibc_ns": 4.9, "engaged_ns": 6.2, "engaged_ratio": 1.26, "lazy_mt_glibc_ns": 14.0, "lazy_mt_ns": 14.1,
         "lazy_mt_ratio": 1.0, "engaged_mt_glibc_ns": 14.0, "engaged_mt_ns": 14.2, "engaged_mt_ratio": 1.01},
        {"algorithm": "mcs", "policy": "spin-then-park", "lazy_glibc_ns": 4.87, "lazy_ns": 4.4, "lazy_ratio": 0.9,
         "engaged_glibc_ns": 4.87, "engaged_ns": 8.81, "engaged_ratio": 1.8, "lazy_mt_glibc_ns": 14.0, "lazy_mt_ns": 14.5,
         "lazy_mt_ratio": 1.03, "engaged_mt_glibc_ns": 14.0, "engaged_mt_ns": 14.6, "engaged_mt_ratio": 1.04}]
REG = [{"name": "posix", "default_policy": "park"}, {"name": "mcs", "default_policy": "spin-then-park"}]


class CsvFormat(unittest.TestCase):
    def test_round_trip(self):
        meta, rows = _report_csv.loads(_report_csv.dumps(META, FIELDS, ROWS))
        self.assertEqual(meta, META)
        self.assertEqual([r["algorithm"] for r in rows], ["posix", "mcs"])
        self.assertEqual(rows[1]["engaged_ns"], "8.81")

    def test_metadata_line_must_be_key_value(self):
        with self.assertRaisesRegex(ReportError, "without 'key: value'"):
            _report_csv.loads("# nonsense\nalgorithm\nposix\n", "x.csv")

    def test_missing_file_is_named(self):
        with self.assertRaisesRegex(ReportError, "nowhere.csv is missing"):
            _report_csv.read("/nonexistent/nowhere.csv")


class Render(unittest.TestCase):
    def load(self, name):
        if name == "interposer":
            return _report_csv.loads(_report_csv.dumps(META, FIELDS, ROWS))
        raise ReportError(f"{name}.csv is missing")

    def test_table_and_run_line(self):
        out = _report_render.render("# T\n\n{{run interposer}}\n\n{{table interposer}}\n", self.load)
        self.assertIn("commit `abc1234`", out)
        self.assertIn("Test CPU, 2 CPUs", out)
        self.assertIn("2026-11-28 20:00 UTC", out)
        self.assertIn("before 66 ns (normal)", out)
        self.assertIn("`build/bin/interpose_overhead -r 5 -n 1000000`, 12 s", out)
        self.assertNotIn("quick", out)
        lines = [ln for ln in out.splitlines() if ln.startswith("|")]
        self.assertEqual(lines[0], "| algorithm | policy | glibc pair (ns) | interposed (ns) | interposed ÷ glibc | "
                                   "engaged (ns) | engaged ÷ glibc | 2 threads: glibc pair (ns) | "
                                   "2 threads: interposed ÷ glibc | 2 threads: engaged ÷ glibc |")
        self.assertEqual(lines[2], "| posix | park | 4.90 | 6.23 | 1.27× | 6.20 | 1.26× | 14.00 | 1.00× | 1.01× |")
        self.assertEqual(lines[3], "| mcs | spin-then-park | 4.87 | 4.40 | 0.90× | 8.81 | 1.80× | 14.00 | 1.03× | 1.04× |")

    def test_cell_and_duration(self):
        out = _report_render.render("{{cell interposer mcs engaged_ratio}} in {{total_duration}}", self.load)
        self.assertEqual(out, "1.80 in 0.2 min")

    def test_quick_run_is_flagged(self):
        q = dict(META, quick="1")
        out = _report_render.render("{{run interposer}}",
                                    lambda n: _report_csv.loads(_report_csv.dumps(q, FIELDS, ROWS)))
        self.assertIn("--quick", out)

    def test_run_metadata_is_required(self):
        bare = {k: v for k, v in META.items() if k != "machine"}
        with self.assertRaisesRegex(ReportError, "lacks machine"):
            _report_render.render("{{run interposer}}",
                                  lambda n: _report_csv.loads(_report_csv.dumps(bare, FIELDS, ROWS)))

    def test_errors(self):
        with self.assertRaisesRegex(ReportError, "headline.csv is missing"):
            _report_render.render("{{table headline}}", self.load)
        with self.assertRaisesRegex(ReportError, "no row 'clh'"):
            _report_render.render("{{cell interposer clh lazy_ratio}}", self.load)
        with self.assertRaisesRegex(ReportError, "unknown placeholder"):
            _report_render.render("{{tabel interposer}}", self.load)
        with self.assertRaisesRegex(ReportError, "does not know"):
            _report_render.render("{{table interposer}}", self.load, sections={"headline"})

    def test_every_section_has_a_table_format(self):
        self.assertEqual(set(_report_sections.by_name()), set(_report_render.TABLES))


class RenderFile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.out = os.path.join(self.d, "BENCHMARKS.md")
        with open(self.out, "w") as f:
            f.write("old report\n")
        self.tpl = os.path.join(self.d, "t.md.in")
        with open(self.tpl, "w") as f:
            f.write("{{table interposer}}\n{{table headline}}\n")
        _report_csv.write(os.path.join(self.d, "interposer.csv"), META, FIELDS, ROWS)

    def tearDown(self):
        self.tmp.cleanup()

    def test_missing_csv_leaves_the_report(self):
        with self.assertRaisesRegex(ReportError, "headline.csv is missing"):
            _report_render.render_file(self.tpl, self.d, self.out)
        with open(self.out) as f:
            self.assertEqual(f.read(), "old report\n")
        self.assertEqual(sorted(os.listdir(self.d)), ["BENCHMARKS.md", "interposer.csv", "t.md.in"])

    def test_written_when_complete(self):
        with open(self.tpl, "w") as f:
            f.write("{{table interposer}}\n")
        _report_render.render_file(self.tpl, self.d, self.out)
        with open(self.out) as f:
            self.assertIn("| mcs | spin-then-park |", f.read())
        self.assertEqual(sorted(os.listdir(self.d)), ["BENCHMARKS.md", "interposer.csv", "t.md.in"])


class Command(unittest.TestCase):
    """`liblock bench report --from-csv` end to end: exit status and files."""

    def run_report(self, d, *extra):
        return subprocess.run([sys.executable, os.path.join(clitest.TOOLS, "liblock"), "bench", "report", "--from-csv",
                               "--csv-dir", d, "--template", os.path.join(d, "t.md.in"),
                               "--output", os.path.join(d, "B.md")] + list(extra),
                              capture_output=True, text=True, timeout=60)

    def test_from_csv(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "t.md.in"), "w") as f:
                f.write("{{table interposer}}\n{{cell interposer posix lazy_glibc_ns}}×\n")
            with open(os.path.join(d, "B.md"), "w") as f:
                f.write("old\n")
            p = self.run_report(d)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("interposer.csv is missing", p.stderr)
            self.assertIn("not written", p.stderr)
            with open(os.path.join(d, "B.md")) as f:
                self.assertEqual(f.read(), "old\n")
            _report_csv.write(os.path.join(d, "interposer.csv"), META, FIELDS,
                              [dict(ROWS[0], lazy_glibc_ns=""), ROWS[1]])
            p = self.run_report(d)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(d, "B.md")) as f:
                text = f.read()
            self.assertIn("| posix | park | – | 6.23 | 1.27× | 6.20 | 1.26× | 14.00 | 1.00× | 1.01× |", text)
            self.assertTrue(text.endswith("\n–\n"), text)     # a missing number takes no unit
            p = self.run_report(d, "--only", "headline")
            self.assertEqual(p.returncode, 2)
            self.assertIn("takes no --only", p.stderr)


class Reductions(unittest.TestCase):
    def test_interposer_needs_every_algorithm_in_every_run(self):
        mcs = "mcs              glibc   4.87 ns (4.87-4.91)  interposed   8.81 ns (8.66-8.82)  ratio 1.80\n"
        posix = "posix            glibc   4.90 ns (4.87-5.04)  interposed   6.23 ns (6.23-6.41)  ratio 1.27\n"
        with tempfile.TemporaryDirectory() as d:
            for i in (2, 3):  # the -m runs: their lines carry "(2 threads)"
                with open(os.path.join(d, f"interpose_overhead-{i}.log"), "w") as f:
                    f.write(mcs.replace("mcs      ", "mcs (2 threads)") + posix.replace("posix    ", "posix (2 threads)"))
            with open(os.path.join(d, "interpose_overhead-0.log"), "w") as f:
                f.write("uncontended lock/unlock pair, 1000 pairs x 2 rounds\n" + mcs)
            with self.assertRaisesRegex(_report_sections.SectionError, "interpose_overhead-1.log missing"):
                _report_sections.reduce_interposer(d, REG)
            with open(os.path.join(d, "interpose_overhead-1.log"), "w") as f:
                f.write(mcs + posix)
            with self.assertRaisesRegex(_report_sections.SectionError, r"\(lazy\): no result for posix"):
                _report_sections.reduce_interposer(d, REG)
            with open(os.path.join(d, "interpose_overhead-0.log"), "a") as f:
                f.write(posix)
            fields, rows = _report_sections.reduce_interposer(d, REG)
            self.assertEqual([r["algorithm"] for r in rows], ["posix", "mcs"])   # registry order
            self.assertEqual(rows[1]["policy"], "spin-then-park")
            self.assertEqual(rows[0]["lazy_ratio"], 1.27)
            self.assertEqual(rows[1]["engaged_ns"], 8.81)
            self.assertEqual(rows[1]["lazy_mt_ratio"], 1.80)
            os.unlink(os.path.join(d, "interpose_overhead-3.log"))
            with self.assertRaisesRegex(_report_sections.SectionError, "interpose_overhead-3.log missing"):
                _report_sections.reduce_interposer(d, REG)

    def test_display_hides_output_options(self):
        argv = ["{liblock}", "bench", "apps", "--reps", "3", "--out", "{out}/fifo", "--quiet", "--no-plot"]
        self.assertEqual(_report_sections.display(argv), "tools/liblock bench apps --reps 3")
        self.assertEqual(_report_sections.display(["{bin}/interpose_overhead", "-r", "5"]),
                         "build/bin/interpose_overhead -r 5")


class Template(unittest.TestCase):
    def test_template_names_known_sections_only(self):
        with open(os.path.join(clitest.ROOT, "bench", "report", "BENCHMARKS.md.in")) as f:
            text = f.read()
        known = set(_report_sections.by_name())
        named = {m.group(2).split()[0] for m in _report_render.PLACEHOLDER.finditer(text)
                 if m.group(1) != "total_duration"}
        self.assertTrue(named)
        self.assertLessEqual(named, known)
        tables = {m.group(2).split()[0] for m in _report_render.PLACEHOLDER.finditer(text) if m.group(1) == "table"}
        self.assertEqual(tables, known)   # every section is in the report


if __name__ == "__main__":
    unittest.main()
