"""`liblock list`: the algorithms with their properties."""
import json
import subprocess

HELP = "list the lock algorithms and their properties"


def add_arguments(p):
    p.add_argument("--json", action="store_true", help="one JSON object per algorithm")


def algorithms(env):
    out = subprocess.run([env.program("liblock-info")], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def run(args, env):
    algos = algorithms(env)
    if args.json:
        for a in algos:
            print(json.dumps(a))
        return 0
    print(f"{'name':<16} {'FIFO':<5} {'deleg':<6} {'cond':<5} {'policies':<34} {'lock B':>7} {'waiter B':>9}  source")
    for a in algos:
        props = a["properties"]
        print(f"{a['name']:<16} {'yes' if 'fifo' in props else 'no':<5} {'yes' if 'delegates' in props else 'no':<6} "
              f"{'yes' if 'cond' in props else 'no':<5} {','.join(a['policies']):<34} {a['lock_bytes']:>7} "
              f"{a['waiter_bytes']:>9}  {a['source']}")
    return 0
