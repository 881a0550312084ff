"""`liblock list`: the algorithms with their properties."""
import json
import subprocess

HELP = "list the lock algorithms and their properties"


def add_arguments(p):
    p.add_argument("--json", action="store_true", help="one JSON object per algorithm")


def algorithms(env):
    out = subprocess.run([env.program("liblock-info")], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def spin_budget(env):
    """The spin phase of spin-then-park on this machine: (ns, source)."""
    out = subprocess.run([env.program("liblock-info"), "--spin-budget"], check=True, capture_output=True,
                         text=True).stdout
    d = json.loads(out)
    return d["spin_budget_ns"], d["source"]


def machine(env):
    """What the library found out about this machine (liblock-info --machine)."""
    out = subprocess.run([env.program("liblock-info"), "--machine"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def run(args, env):
    algos = algorithms(env)
    if args.json:
        for a in algos:
            print(json.dumps(a))
        return 0
    print(f"{'name':<16} {'FIFO':<5} {'deleg':<6} {'cond':<5} {'default':<15} {'policies':<34} {'lock B':>7} "
          f"{'waiter B':>9}  source")
    for a in algos:
        props = a["properties"]
        print(f"{a['name']:<16} {'yes' if 'fifo' in props else 'no':<5} {'yes' if 'delegates' in props else 'no':<6} "
              f"{'yes' if 'cond' in props else 'no':<5} {a['default_policy']:<15} {','.join(a['policies']):<34} "
              f"{a['lock_bytes']:>7} {a['waiter_bytes']:>9}  {a['source']}")
    print()
    print("With more threads than CPUs, under the default policy:")
    for a in algos:
        what = a.get("oversubscribed") or "(not stated)"
        print(f"  {a['name']:<16} {a['default_policy']}: {what}")
    ns, src = spin_budget(env)
    print()
    print(f"spin-then-park spins {ns} ns before parking ({src}; LIBLOCK_SPIN_NS overrides).")
    print("Pure 'spin' is for dedicated cores: with more threads than CPUs a FIFO lock hands the lock to")
    print("threads that are not running (ask for it with --wait spin or LIBLOCK_WAIT=spin).")
    m = machine(env)
    avail = lambda b: "available" if b else "not available"
    print()
    print("Machine:")
    print(f"  CPUs                     {m['cpus']} (topology from {m['topology']}), cache line {m['cacheline']} B")
    print(f"  UMWAIT/TPAUSE (WAITPKG)  {avail(m['waitpkg'])}")
    print(f"  MONITORX/MWAITX          {avail(m['monitorx'])}")
    how = {"umwait": "UMWAIT", "mwaitx": "MWAITX"}.get(m["uwait"], "pause loop")
    print(f"  mailbox waits (hyblock, hybcomb) spin with: {how}"
          + ("" if how != "pause loop" else f" ({m['uwait']})")
          + ("; LIBLOCK_UWAIT=0 turns it off" if how != "pause loop" else ""))
    print(f"  thread on a CPU (ll_oncpu) {m['oncpu_reason']}")
    if m.get("oncpu") == "ebpf":
        print("  preempt-aware waiting      active: waiters park as soon as the thread they wait for is preempted")
    else:
        print("  preempt-aware waiting      inactive (it needs the eBPF program: `liblock oncpu load` as root): "
              "--wait preempt-aware is spin-then-park here")
    return 0
