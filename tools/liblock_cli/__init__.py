"""The `liblock` command: dispatch to one module per subcommand."""
import argparse
import importlib
import os
import pkgutil
import signal
import sys


class Env:
    """Where liblock's libraries and helper programs are."""

    def __init__(self, tools_dir, prefix):
        if prefix:
            self.libdir = os.path.join(prefix, "lib")
            self.bindir = os.path.join(prefix, "libexec", "liblock")
            self.root = None
        else:
            self.root = os.path.dirname(tools_dir)
            build = os.environ.get("LIBLOCK_BUILD", os.path.join(self.root, "build"))
            self.libdir = os.path.join(build, "lib")
            self.bindir = os.path.join(build, "bin")
        self.results = os.environ.get("LIBLOCK_RESULTS", os.path.join(self.root or os.getcwd(), "results"))

    def lib(self, name):
        return os.path.join(self.libdir, name)

    def program(self, name):
        path = os.path.join(self.bindir, name)
        if not os.path.exists(path):
            raise SystemExit(f"liblock: {path} is missing (run `make` first)")
        return path


def subcommands():
    pkgdir = os.path.dirname(__file__)
    names = sorted(m.name for m in pkgutil.iter_modules([pkgdir]) if not m.name.startswith("_"))
    return [(n.replace("_", "-"), n) for n in names]


def build_parser():
    """The `liblock` argument parser with every subcommand; returns (parser,
    {command name: its module})."""
    parser = argparse.ArgumentParser(prog="liblock", description="liblock: lock algorithms, RCL, tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def one_line_error(message):  # a bad option is one line naming it, not the usage text
        cmd = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
        hint = f"liblock {cmd} -h" if cmd in dict(subcommands()) else "liblock -h"
        print(f"liblock: {message} (see `{hint}`)", file=sys.stderr)
        sys.exit(2)
    parser.error = one_line_error
    mods = {}
    for cli_name, mod_name in subcommands():
        mod = importlib.import_module(f"liblock_cli.{mod_name}")
        p = sub.add_parser(cli_name, help=getattr(mod, "HELP", ""), description=getattr(mod, "HELP", ""))
        mod.add_arguments(p)
        mods[cli_name] = mod
    return parser, mods


def main(tools_dir, prefix):
    parser, mods = build_parser()
    args = parser.parse_args()
    if not args.command:
        parser.print_help()
        return 2
    try:
        return mods[args.command].run(args, Env(tools_dir, prefix)) or 0
    except BrokenPipeError:
        # the reader left (`liblock list | head`): stop quietly, as a shell
        # tool killed by SIGPIPE does, and keep Python from complaining
        # again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
