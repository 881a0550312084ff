"""The modules of tools/liblock_cli import one another without a cycle,
counting imports inside functions too (a function-local import only hides a
cycle), and name each other by their real names, not one-letter aliases."""
import ast
import os
import unittest

import clitest


def package_imports(path):
    """(module name, alias or None) of every module of this package that the
    file at path imports, anywhere in the file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    mods = {os.path.splitext(f)[0] for f in os.listdir(clitest.PKG) if f.endswith(".py")}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module is None:          # from . import X [as Y]
                out += [(a.name, a.asname) for a in node.names]
            elif node.level == 1:                                 # from .X import y
                out.append((node.module.split(".")[0], None))
            elif node.level == 0 and node.module and node.module.startswith("liblock_cli."):
                out.append((node.module.split(".")[1], None))
        elif isinstance(node, ast.Import):
            out += [(a.name.split(".")[1], a.asname) for a in node.names if a.name.startswith("liblock_cli.")]
    return [(m, a) for m, a in out if m in mods]


def graph():
    g = {}
    for f in sorted(os.listdir(clitest.PKG)):
        if f.endswith(".py"):
            g[os.path.splitext(f)[0]] = package_imports(os.path.join(clitest.PKG, f))
    return g


def find_cycle(edges):
    """One cycle of the directed graph {node: [node]} as a list, or None."""
    state = {}

    def visit(n, stack):
        state[n] = 1
        stack.append(n)
        for m in edges.get(n, []):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m, stack)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            c = visit(n, [])
            if c:
                return c
    return None


class FindCycle(unittest.TestCase):
    def test_finds_a_cycle(self):
        self.assertEqual(find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}), ["a", "b", "c", "a"])
        self.assertIsNone(find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}))

    def test_sees_local_imports(self):
        src = "def f():\n    from . import _runner as R\n    from ._report import x\n"
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(src)
        try:
            self.assertEqual(package_imports(f.name), [("_runner", "R"), ("_report", None)])
        finally:
            os.unlink(f.name)


class Imports(unittest.TestCase):
    def test_no_cycle(self):
        edges = {m: [n for n, _ in imps if n != "__init__"] for m, imps in graph().items()}
        self.assertIn("_runner", edges["bench"])
        self.assertIsNone(find_cycle(edges), "import cycle in tools/liblock_cli")

    def test_no_one_letter_aliases(self):
        short = [(m, n, a) for m, imps in graph().items() for n, a in imps if a and len(a) == 1]
        self.assertEqual(short, [], "modules of the package imported under one-letter names")


if __name__ == "__main__":
    unittest.main()
