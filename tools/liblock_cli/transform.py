"""`liblock transform`: turn the critical sections of C files into functions
run by liblock_execute_mutex (docs/transform.md)."""
import argparse
import difflib
import json
import os
import stat
import sys
import tempfile

HELP = "turn C critical sections into functions any lock (RCL included) can run"


def add_arguments(p):
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
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


EPILOG = """\
exit status:
  0  every section to transform was transformed (and every output compiled)
  1  some sections were refused (each named on standard error as FILE:LINE: refused: REASON);
     the others were transformed and written
  2  error: a bad option, or an input file missing, binary or not compiling with the flags
     given: no source file was written; or a file that could not be written (those written
     before it stay written, each whole)
Every output is compiled (libclang, the flags after --, plus liblock's include directory)
before anything is written; a section whose output does not compile is refused with the
compiler's first error.  Files are written only once every file's output compiles, each one
atomically (a temporary file in the same directory, then rename).  Bytes outside the
rewritten sections are copied unchanged."""


def liblock_include(env):
    """The directory of liblock.h the output includes: the source tree's
    include/ or the installed prefix's."""
    if env.root:
        return os.path.join(env.root, "include")
    return os.path.join(os.path.dirname(env.libdir), "include")


class Diag:
    """An error of a parse, kept as plain values (a libclang diagnostic
    cannot outlive its translation unit)."""

    def __init__(self, d):
        loc = d.location
        self.file = loc.file.name if loc.file is not None else None
        self.line, self.column, self.offset = loc.line, loc.column, loc.offset
        try:
            self.message = d.spelling
        except UnicodeDecodeError:
            self.message = "(message not UTF-8)"

    def text(self, path):
        """FILE:LINE:COL: error: MESSAGE, with the file named even when the
        diagnostic has no location (clang's "too many errors emitted")."""
        if self.file is None:
            return f"{path}: error: {self.message}"
        return f"{self.file}:{self.line}:{self.column}: error: {self.message}"


def errors_of(tu):
    from clang import cindex
    return [Diag(d) for d in tu.diagnostics if d.severity >= cindex.Diagnostic.Error]


def compile_errors(index, path, data, flags):
    """The errors of `data` compiled as `path` (its directory for "..."
    includes) with `flags`: the syntax and semantic check the input passed."""
    return errors_of(index.parse(path, args=list(flags), unsaved_files=[(path, data)]))


def checked_output(ft, sel, index, flags):
    """The new bytes of one file (None when unchanged), compiled: a section
    whose generated code does not compile is refused with the compiler's
    first error and the file is generated again without it.  An error that
    no section's text contains refuses every section of the file."""
    forced = {}
    for _ in range(len(ft.sections) + 1):
        new, regions = ft.apply(sel, forced)
        if new is None:
            return None
        errs = compile_errors(index, ft.given, new, flags)
        if not errs:
            return new
        d = errs[0]
        where = [s for a, b, s in regions if s is not None and a <= d.offset < b] \
            if d.file is not None and os.path.abspath(d.file) == ft.path else []
        line = f" (line {d.line} of the output)" if d.file is not None else ""
        reason = f"the transformed file does not compile: {d.message}{line}"
        culprits = [s for s in where[:1] or [s for a, b, s in regions if s is not None] if s not in forced]
        if not culprits:  # the wrappers' mutex functions alone do not compile
            raise OutputError(f"{d.text(ft.given)}: the transformed file does not compile")
        for s in culprits:
            forced[s] = reason
    raise OutputError(f"{ft.given}: the transformed file still does not compile")


class OutputError(Exception):
    pass


def write_atomic(dest, data, like=None):
    """Write `dest` as a whole or not at all: a temporary file in its
    directory, renamed over it (the target of a symbolic link is
    replaced, not the link).  The mode is `like`'s, or the default one."""
    real = os.path.realpath(dest)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(real) or ".", prefix=f".{os.path.basename(real)}.",
                               suffix=".liblock-tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if like is not None:
            os.chmod(tmp, stat.S_IMODE(os.stat(like).st_mode))
        else:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, real)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
        names = [os.path.basename(f) for f in files]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            print(f"liblock transform: --out {args.out}: two files named {dup[0]}", file=sys.stderr)
            return 2
    import_clang()
    from clang import cindex
    from liblock_cli._transform_c import FileTransform
    from liblock_cli._transform_wrap import definition_ranges
    index = cindex.Index.create()
    # the output includes liblock.h: compiled with its directory after the user's flags
    oflags = list(flags) + ["-I", liblock_include(env)]
    report, errors = [], 0
    parsed, wranges = [], {}
    for path in files:  # every file first: a wrapper defined in one may be used in another
        if not os.path.isfile(path):
            print(f"liblock transform: {path}: no such file", file=sys.stderr)
            errors += 1
            continue
        with open(path, "rb") as f:
            src = f.read()
        nul = src.find(b"\0")
        if nul >= 0:
            print(f"liblock transform: {path}: a binary file (a NUL byte at offset {nul}), not C source; "
                  f"refused", file=sys.stderr)
            errors += 1
            continue
        ft = FileTransform(path, oflags, wrappers, index, src)
        errs = errors_of(ft.tu)
        if errs:
            for d in errs:
                print(d.text(path), file=sys.stderr)
            print(f"liblock transform: {path}: does not compile with the flags given", file=sys.stderr)
            errors += 1
            continue
        ft.run()
        wranges.update(definition_ranges(ft))
        parsed.append((path, ft))
    sel = selector(args.only, wranges)
    outputs, refused = [], 0
    for path, ft in parsed:
        try:
            new = checked_output(ft, sel, index, oflags)
        except OutputError as e:
            print(f"liblock transform: {e}", file=sys.stderr)
            errors += 1
            new = None
        for sec in ft.sections:
            entry = ft.report_entry(sec)
            if args.only:
                entry["selected"] = bool(sel(sec))
            report.append(entry)
            if sec.status == "refused":
                print(f"{path}:{sec.line}: refused: {sec.why}", file=sys.stderr)
                if sel(sec):
                    refused += 1
        outputs.append((path, ft.src, new))
    if errors:
        print(f"liblock transform: {errors} file(s) in error: no file written", file=sys.stderr)
    else:
        out = sys.stdout.buffer
        for path, old, new in outputs:
            data = new if new is not None else old
            if args.diff and new is not None:
                sys.stdout.flush()
                dec = lambda b: b.decode("utf-8", "surrogateescape").splitlines(True)  # noqa: E731
                out.writelines(x.encode("utf-8", "surrogateescape") for x in
                               difflib.unified_diff(dec(old), dec(new), f"a/{path}", f"b/{path}"))
            try:
                if args.out:
                    os.makedirs(args.out, exist_ok=True)
                    write_atomic(os.path.join(args.out, os.path.basename(path)), data)
                elif args.in_place:
                    if new is not None:
                        write_atomic(path, new, like=path)
                elif not args.diff:
                    out.write(data)
            except OSError as e:
                print(f"liblock transform: {path}: {e.strerror}: not written", file=sys.stderr)
                errors += 1
        out.flush()
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
    return 2 if errors else 1 if refused else 0
