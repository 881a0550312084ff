"""The engine of `liblock transform` (_transform_c.py and its helpers) on
tiny C snippets parsed with libclang: which sections it finds, how it
classifies their variables, what it refuses and why, and that the text it
writes calls liblock_execute_mutex.  Skipped, with the cause, without
libclang's Python bindings."""
import os
import tempfile
import unittest

import clitest  # noqa: F401 (the import path)
from liblock_cli import transform

try:
    transform.import_clang()
    from liblock_cli import _transform_c, _transform_common
    CLANG = None
except SystemExit as e:
    CLANG = str(e)

HEAD = "#include <pthread.h>\nstatic pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\nstatic int g;\n"


@unittest.skipIf(CLANG, CLANG)
class Engine(unittest.TestCase):
    def sections(self, body, wrappers=()):
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: (os.unlink(os.path.join(d, "t.c")), os.rmdir(d)))
        path = os.path.join(d, "t.c")
        src = (HEAD + body).encode()
        with open(path, "wb") as f:
            f.write(src)
        ft = _transform_c.FileTransform(path, [], list(wrappers), src=src)
        self.assertEqual(ft.errors, [])
        ft.run()
        new, _ = ft.apply(lambda sec: True)
        return ft, [ft.report_entry(s) for s in ft.sections], new

    def test_inputs_and_outputs(self):
        ft, secs, new = self.sections(
            "int f(int a) {\n  int b = 0;\n  pthread_mutex_lock(&m);\n  g += a;\n  b = g;\n"
            "  pthread_mutex_unlock(&m);\n  return b;\n}\n")
        self.assertEqual(len(secs), 1)
        s = secs[0]
        self.assertEqual((s["status"], s["function"], s["line"], s["mutex"]), ("transformed", "f", 6, "&m"))
        self.assertEqual(s["inputs"], ["a"])
        self.assertEqual(s["outputs"], ["b"])
        self.assertIn(b"liblock_execute_mutex", new)
        self.assertNotIn(b"pthread_mutex_lock(&m)", new)

    def test_refused_with_reason(self):
        # the unlock under a preprocessor conditional: half of it in the section
        _, secs, new = self.sections(
            "void f(void) {\n  pthread_mutex_lock(&m);\n  g++;\n#ifdef X\n  pthread_mutex_unlock(&m);\n#else\n"
            "  pthread_mutex_unlock(&m);\n#endif\n}\n")
        self.assertTrue(secs)
        self.assertTrue(all(s["status"] == "refused" for s in secs), secs)
        self.assertIsNone(new)

    def test_early_exit(self):
        _, secs, _ = self.sections(
            "int f(int a) {\n  pthread_mutex_lock(&m);\n  if (a) {\n    pthread_mutex_unlock(&m);\n    return 1;\n"
            "  }\n  g++;\n  pthread_mutex_unlock(&m);\n  return 0;\n}\n")
        self.assertEqual(secs[0]["status"], "transformed")
        self.assertEqual([x["kind"] for x in secs[0]["exits"]], ["return"])

    def test_common_helpers(self):
        ft, _, _ = self.sections("void f(void) { (void)(g); }\n")
        f = next(c for c in ft.tu.cursor.get_children() if c.spelling == "f")
        body = _transform_common.children(f)[-1]
        stmt = _transform_common.children(body)[0]
        self.assertEqual(_transform_common.strip(stmt).spelling, "g")   # through (void) and parentheses
        g = _transform_common.strip(stmt).referenced
        self.assertEqual(_transform_common.decl_key(g)[0], "g")
        self.assertEqual(_transform_common.decl_key(g), _transform_common.decl_key(g.canonical))
        self.assertTrue(issubclass(_transform_c.Refused, Exception))
        self.assertIs(_transform_c.Refused, _transform_common.Refused)


if __name__ == "__main__":
    unittest.main()
