"""`liblock transform`: turn the critical sections of C files into functions
run by liblock_execute_mutex (docs/transform.md)."""
import difflib
import json
import os
import sys

HELP = "turn C critical sections into functions any lock (RCL included) can run"


def add_arguments(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="DIR", help="write each transformed file as DIR/<its name>")
    g.add_argument("--in-place", action="store_true", help="rewrite the files themselves")
    p.add_argument("--only", nargs="+", metavar="SITE", default=None,
                   help="transform only these sections: FILE:LINE of the lock call (as the profiler prints "
                        "sites), LINE, or a function name")
    p.add_argument("--wrapper", nargs="+", metavar="LOCK:UNLOCK", default=[],
                   help="functions that lock/unlock a mutex: given as their argument (q_lock(&m)) or computed from "
                        "their arguments (item_lock(hv); transform the file defining LOCK in the same run)")
    p.add_argument("--report", metavar="FILE", help="write a JSON report of every section (- for stdout)")
    p.add_argument("--diff", action="store_true", help="print a unified diff of each changed file")
    p.add_argument("files", nargs="*", metavar="FILE.c [-- COMPILER FLAGS]")


def import_clang():
    try:
        from clang import cindex  # noqa: F401
    except ImportError:
        # Debian's python3-clang lives in the system's dist-packages, which a
        # non-system python3 (pyenv, venv) does not search.
        deb = "/usr/lib/python3/dist-packages"
        if os.path.isdir(os.path.join(deb, "clang")) and deb not in sys.path:
            sys.path.append(deb)
        try:
            from clang import cindex  # noqa: F401
        except ImportError:
            raise SystemExit("liblock transform: libclang's Python bindings are missing "
                             "(apt-get install python3-clang, or scripts/deps.sh)")


def split_flags(args):
    """argparse drops the `--`; recover the compiler flags after it."""
    argv = sys.argv
    if "--" in argv:
        flags = argv[argv.index("--") + 1:]
        files = args.files[:len(args.files) - len(flags)] if flags else args.files
        return files, flags
    return args.files, []


def same_file(f, path):
    return os.path.basename(f) == os.path.basename(path) or path.endswith(f)


def selector(only, wranges=None):
    """--only: FILE:LINE of a lock call (or of the lock call inside a
    --wrapper's body, which selects every section locked through that
    wrapper: the profiler names the caller of pthread_mutex_lock), LINE, or
    the enclosing function's name."""
    if not only:
        return lambda sec: True
    wranges = wranges or {}

    def sel(sec):
        for s in only:
            if ":" in s:
                f, _, line = s.rpartition(":")
                if line.isdigit() and int(line) == sec.line and same_file(f, sec_path(sec)):
                    return True
                w = wranges.get(getattr(sec, "lock_fn", None))
                if line.isdigit() and w and w[1] <= int(line) <= w[2] and same_file(f, w[0]):
                    return True
            elif s.isdigit() and int(s) == sec.line:
                return True
            elif s == sec.func.spelling:
                return True
        return False
    return sel


def sec_path(sec):
    return sec.lock_stmt.extent.start.file.name


def run(args, env):
    files, flags = split_flags(args)
    if not files:
        print("liblock transform: no input file", file=sys.stderr)
        return 2
    wrappers = []
    for w in args.wrapper:
        lock, sep, unlock = w.partition(":")
        if not sep or not lock or not unlock:
            print(f"liblock transform: --wrapper {w}: expected LOCK:UNLOCK", file=sys.stderr)
            return 2
        wrappers.append((lock, unlock))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    import_clang()
    from clang import cindex
    from liblock_cli._transform_c import FileTransform
    index = cindex.Index.create()
    from liblock_cli._transform_wrap import definition_ranges
    report, rc = [], 0
    parsed, wranges = [], {}
    for path in files:  # every file first: a wrapper defined in one may be used in another
        if not os.path.isfile(path):
            print(f"liblock transform: {path}: no such file", file=sys.stderr)
            rc = 1
            continue
        ft = FileTransform(path, flags, wrappers, index)
        if ft.errors:
            for d in ft.errors:
                loc = d.location
                print(f"{loc.file}:{loc.line}:{loc.column}: error: {d.spelling}", file=sys.stderr)
            print(f"liblock transform: {path}: does not compile with the flags given; left unchanged",
                  file=sys.stderr)
            rc = 1
            continue
        ft.run()
        wranges.update(definition_ranges(ft))
        parsed.append((path, ft))
    sel = selector(args.only, wranges)
    for path, ft in parsed:
        new = ft.apply(sel)
        for sec in ft.sections:
            entry = ft.report_entry(sec)
            if args.only:
                entry["selected"] = bool(sel(sec))
            report.append(entry)
            if sec.status == "refused":
                print(f"{path}:{sec.line}: refused: {sec.reason}", file=sys.stderr)
        text = new if new is not None else ft.src.decode("utf-8", "replace")
        if args.diff and new is not None:
            old = ft.src.decode("utf-8", "replace")
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       f"a/{path}", f"b/{path}"))
        if args.out:
            with open(os.path.join(args.out, os.path.basename(path)), "w") as f:
                f.write(text)
        elif args.in_place:
            if new is not None:
                with open(path, "w") as f:
                    f.write(new)
        elif not args.diff:
            sys.stdout.write(text)
    if args.report:
        data = json.dumps({"sections": report}, indent=2) + "\n"
        if args.report == "-":
            sys.stdout.write(data)
        else:
            with open(args.report, "w") as f:
                f.write(data)
    n = {s: sum(1 for e in report if e["status"] == s) for s in ("transformed", "refused", "nested", "skipped")}
    print(f"liblock transform: {n['transformed']} transformed, {n['refused']} refused, {n['nested']} nested, "
          f"{n['skipped']} not selected", file=sys.stderr)
    return rc
