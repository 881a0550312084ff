"""`liblock malthus`: the old spelling of `liblock bench malthus` (_malthus.py),
kept so existing scripts and notes still run."""
from . import _malthus

HELP = "alias of `liblock bench malthus` (the Malthusian-locks workloads)"


def add_arguments(p):
    _malthus.add_arguments(p)


def run(args, env):
    return _malthus.run(args, env)
