"""Shared by the CLI unit tests (tests/cli/test_*.py): puts tools/ on the
import path so `liblock_cli` is the repository's, and says where the
repository and the test fixtures are."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
PKG = os.path.join(TOOLS, "liblock_cli")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

# a registry as `liblock-info` prints it, for the parsers that check names
ALGORITHMS = {
    "mcs": {"name": "mcs", "policies": ["spin", "spin-then-park", "yield"]},
    "ticket": {"name": "ticket", "policies": ["spin"]},
    "rcl": {"name": "rcl", "policies": ["spin", "yield"]},
}
