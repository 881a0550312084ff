"""Per-site lock configuration files (LIBLOCK_CONFIG, `liblock run --config`).

Grammar (docs/profile.md, "The configuration file"; the C parser of the
interposer is authoritative):

    # comment                     blank lines and text after '#' are ignored
    default ALGORITHM [wait=POLICY]
    site KEY ALGORITHM [wait=POLICY] [server=CPU]

KEY is a 16-hex-digit site id, a `file.c:LINE` or the symbol of a static
mutex; ALGORITHM a registry name or `glibc`; server= only for rcl.

`check()` here is PRE-VALIDATION ONLY, used when build/bin/liblock-config-check
(which runs the interposer's own parser) is not there: it lets a tool refuse
a bad file before it starts a long run.  `write()` produces the files
`liblock profile --advise` writes.
"""
import os
import re
import subprocess

WAITS = ("spin", "spin-then-park", "stp", "yield", "park", "preempt-aware", "default")
_ID = re.compile(r"^[0-9a-fA-F]{16}$")
_FILELINE = re.compile(r"^.+:0*[1-9][0-9]*$")   # the last ':' separates the file from the line
_SYMBOL = re.compile(r"^[A-Za-z0-9_.$]+$")


class ConfigError(Exception):
    """One line: FILE:LINE: problem."""


def key_kind(key):
    if _ID.match(key):
        return "id"
    if _FILELINE.match(key):
        return "file:line"
    if ":" not in key and _SYMBOL.match(key):
        return "symbol"
    return None


def _policy_name(p):
    return "spin-then-park" if p == "stp" else p


def parse(path, algorithms):
    """Parse and check a configuration file.  `algorithms`: {name: registry
    record} (from `liblock-info`).  Returns {"default": (alg, wait) | None,
    "sites": [(key, alg, wait, server)]}; raises ConfigError with a
    `FILE:LINE: problem` message on the first bad line, OSError if the file
    cannot be read."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out = {"default": None, "sites": []}
    default_line = None
    for n, raw in enumerate(lines, 1):
        if "\0" in raw:
            raise ConfigError(f"{path}:{n}: NUL byte in the line")
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        where = f"{path}:{n}"
        words = text.split()
        verb = words[0]
        if verb == "default":
            if default_line is not None:
                raise ConfigError(f"{where}: a second 'default' line (the first is line {default_line})")
            if len(words) < 2:
                raise ConfigError(f"{where}: 'default' needs an algorithm name")
            alg, opts = words[1], words[2:]
            key = None
        elif verb == "site":
            if len(words) < 3:
                raise ConfigError(f"{where}: 'site' needs a key and an algorithm name (site KEY ALGORITHM [wait=POLICY] [server=CPU])")
            key, alg, opts = words[1], words[2], words[3:]
            if key_kind(key) is None:
                raise ConfigError(f"{where}: bad site key '{key}' (a 16-hex-digit id, file.c:LINE or a symbol)")
            if key_kind(key) == "file:line" and int(key.rsplit(":", 1)[1]) > 2147483647:
                raise ConfigError(f"{where}: bad site key '{key}' (line number past 2147483647)")
        else:
            raise ConfigError(f"{where}: unknown directive '{verb}' (expected 'default' or 'site')")
        if alg != "glibc" and alg not in algorithms:
            raise ConfigError(f"{where}: unknown algorithm '{alg}' (valid: glibc {' '.join(sorted(algorithms))})")
        wait = server = None
        for o in opts:
            name, eq, val = o.partition("=")
            if not eq or not val:
                raise ConfigError(f"{where}: bad option '{o}' (expected wait=POLICY or server=CPU)")
            if name == "wait":
                if wait is not None:
                    raise ConfigError(f"{where}: wait= given twice")
                if val not in WAITS:
                    raise ConfigError(f"{where}: unknown waiting policy '{val}' (valid: {' '.join(WAITS)})")
                if alg == "glibc":
                    raise ConfigError(f"{where}: wait= does not apply to glibc's mutex")
                pol = algorithms[alg].get("policies", [])
                if val != "default" and _policy_name(val) not in pol:
                    raise ConfigError(f"{where}: algorithm '{alg}' does not support waiting policy '{val}' "
                                      f"(valid: {' '.join(pol)})")
                wait = val
            elif name == "server":
                if verb != "site":
                    raise ConfigError(f"{where}: server= applies to a 'site' line only")
                if alg != "rcl":
                    raise ConfigError(f"{where}: server= applies to rcl only, not '{alg}'")
                if server is not None:
                    raise ConfigError(f"{where}: server= given twice")
                if not val.isdigit():
                    raise ConfigError(f"{where}: bad server CPU '{val}' (a CPU number)")
                ncpu = os.cpu_count() or 1
                if int(val) >= ncpu:
                    raise ConfigError(f"{where}: server CPU {val} does not exist (CPUs 0-{ncpu - 1})")
                server = int(val)
            else:
                raise ConfigError(f"{where}: unknown option '{name}=' (expected wait= or server=)")
        if verb == "default":
            default_line = n
            out["default"] = (alg, wait)
        else:
            out["sites"].append((key, alg, wait, server))
    return out


def validate(path, algorithms, checker=None):
    """Validate a configuration file before a program is started.  With the
    interposer's checker program (build/bin/liblock-config-check) present,
    its verdict is the answer; otherwise the Python pre-validation above.
    Returns None when the file is good, else the one-line problem."""
    if not os.path.isfile(path):
        return f"liblock: {path}: no such file" if not os.path.exists(path) else f"liblock: {path}: not a file"
    if not os.access(path, os.R_OK):
        return f"liblock: {path}: not readable"
    if checker and os.access(checker, os.X_OK):
        p = subprocess.run([checker, path], capture_output=True, text=True)
        if p.returncode == 0:
            return None
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        return lines[0] if lines else f"liblock: {path}: rejected by {os.path.basename(checker)} (exit {p.returncode})"
    try:
        parse(path, algorithms)
    except ConfigError as e:
        return f"liblock: {e}"
    except OSError as e:
        return f"liblock: {path}: {e.strerror}"
    return None


def write(path, header, entries):
    """Write a configuration file.  entries: [(comment_lines, key, alg,
    wait, server)]; comment lines go above their directive."""
    with open(path, "w") as f:
        for h in header:
            f.write(f"# {h}\n" if h else "#\n")
        for comments, key, alg, wait, server in entries:
            f.write("\n")
            for c in comments:
                f.write(f"# {c}\n")
            line = f"site {key} {alg}"
            if wait:
                line += f" wait={wait}"
            if server is not None:
                line += f" server={server}"
            f.write(line + "\n")
