"""The small CSV files behind BENCHMARKS.md (bench/report/SECTION.csv): one
per section of the report, written by `liblock bench report` from the raw
results of the section's run and read back to render the report.

Format: leading comment lines `# key: value` carry the run's metadata
(section, commit, machine, date, probe regimes, command, duration, quick),
then an ordinary CSV with a header row; each data row is one row of the
section's table, in the order the table shows it.

Files are written to a temporary name in the same directory and renamed,
so a reader never sees half a file and an interrupted run leaves the old
one in place."""
import csv
import io
import os
import tempfile

META_KEYS = ("section", "commit", "machine", "date_utc", "regimes", "command", "duration_s", "quick")


class ReportError(Exception):
    """A report input is missing or malformed; the message says which and how to get it."""


def write_atomic(path, text):
    """Write text to path through a temporary file in the same directory."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=d)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def dumps(meta, fields, rows):
    """The text of a section CSV: metadata comments, header, rows."""
    out = io.StringIO()
    for k in META_KEYS:
        if k in meta:
            v = str(meta[k]).replace("\n", " ")
            out.write(f"# {k}: {v}\n")
    w = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(r.get(k, "")) for k in fields})
    return out.getvalue()


def _cell(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else v


def write(path, meta, fields, rows):
    write_atomic(path, dumps(meta, fields, rows))


def loads(text, name="?"):
    """(meta, rows) from the text of a section CSV."""
    meta, body = {}, []
    for line in text.splitlines(keepends=True):
        if not body and line.startswith("#"):
            key, sep, val = line[1:].strip().partition(":")
            if not sep:
                raise ReportError(f"{name}: metadata line without 'key: value': {line.strip()}")
            meta[key.strip()] = val.strip()
        else:
            body.append(line)
    if not body:
        raise ReportError(f"{name}: no header row")
    rows = list(csv.DictReader(io.StringIO("".join(body))))
    return meta, rows


def read(path):
    try:
        with open(path, newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise ReportError(f"{path} is missing")
    except OSError as e:
        raise ReportError(f"{path}: {e}")
    return loads(text, path)
