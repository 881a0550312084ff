"""Computed lock wrappers for `liblock transform` (docs/transform.md).

`--wrapper LOCK:UNLOCK` names functions that lock and unlock a mutex.  When
LOCK takes exactly one `pthread_mutex_t *`, the section's mutex is that
argument (a *plain* wrapper, handled in _transform_c.py like
pthread_mutex_lock).  Otherwise the wrapper *computes* the mutex from its
arguments, like memcached's

    void item_lock(uint32_t hv) { mutex_lock(&item_locks[hv & hashmask(item_lock_hashpower)]); }

A section is then `LOCK(args); ... UNLOCK(args);` with the same argument
list (compared like mutex expressions), and the transformed call site needs
the mutex itself.  The file that defines LOCK gets, right after LOCK, a
function with LOCK's parameters returning what LOCK's body locks:

    pthread_mutex_t *__liblock_mutex_item_lock(uint32_t hv);
    pthread_mutex_t *__liblock_mutex_item_lock(uint32_t hv)
    {
        return &item_locks[hv & hashmask(item_lock_hashpower)];
    }

and each transformed section calls
`liblock_execute_mutex(__liblock_mutex_item_lock(hv), fn, ctx)`.  Files that
use LOCK without defining it get the prototype; the defining file must be
transformed with the same --wrapper (or the link reports the function
missing).  LOCK's body must be one lock statement (pthread_mutex_lock, a
macro expanding to it, or a plain wrapper); UNLOCK(args) is trusted to
unlock what LOCK(args) locked, as a wrapper pair always is.
"""
from clang import cindex as ci

from ._transform_common import Refused, strip

K = ci.CursorKind


def mutex_fn(lock):
    return f"__liblock_mutex_{lock}"


def _is_mutex_ptr(t):
    c = t.get_canonical()
    return c.kind == ci.TypeKind.POINTER and "pthread_mutex_t" in (
        (t.get_pointee().spelling if t.kind == ci.TypeKind.POINTER else t.spelling) + " " + c.get_pointee().spelling)


def computed(call):
    """True when the wrapper called here is not a plain one."""
    d = call.referenced
    params = list(d.get_arguments()) if d is not None else []
    if d is None:
        return len(list(call.get_arguments())) != 1
    return not (len(params) == 1 and _is_mutex_ptr(params[0].type))


class WrapperDef:
    """A computed lock wrapper defined in the file: where it ends, its
    prototype, and the text of the mutex it locks (or why there is none)."""

    def __init__(self, ft, func):
        self.func, self.name = func, func.spelling
        self.end = func.extent.end.offset
        params = list(func.get_arguments())
        plist = ", ".join(f"{p.type.spelling} {p.spelling}" for p in params) or "void"
        self.static = func.storage_class == ci.StorageClass.STATIC
        self.proto = f"pthread_mutex_t *{mutex_fn(self.name)}({plist})"
        self.expr, self.error = None, None
        body = [c for c in func.get_children() if c.kind == K.COMPOUND_STMT]
        stmts = list(body[0].get_children()) if body else []
        if len(stmts) != 1:
            self.error = f"the body of the wrapper {self.name}() is not one lock statement"
            return
        st = stmts[0]
        m = ft.mutex_of(st, ft.lock_names)
        if not m or not ft.in_file(st):
            self.error = f"the body of the wrapper {self.name}() is not one lock statement"
            return
        # the text between the outer parentheses of the lock statement, as written
        a, b = st.extent.start.offset, st.extent.end.offset
        txt = ft.text(a, b)
        lp, rp = txt.find("("), txt.rfind(")")
        if lp < 0 or rp <= lp:
            self.error = f"the lock statement of the wrapper {self.name}() has no argument text"
            return
        self.expr = txt[lp + 1:rp].strip()


def find_definitions(ft):
    """Computed lock wrappers (named by --wrapper) defined in this file."""
    out = {}
    locks = {w[0] for w in ft.wrappers}
    for f in ft.tu.cursor.get_children():
        if f.kind == K.FUNCTION_DECL and f.is_definition() and ft.in_file(f) and f.spelling in locks:
            params = list(f.get_arguments())
            if not (len(params) == 1 and _is_mutex_ptr(params[0].type)):
                out[f.spelling] = WrapperDef(ft, f)
    return out


def check_section(ft, sec, call):
    """Refuse a section whose computed wrapper, defined in this file, has a
    body the tool cannot turn into a mutex function."""
    d = ft.wrapper_defs.get(call.spelling)
    if d is not None and d.error:
        raise Refused(d.error)
    sec.wrapper = call.spelling


def edits(ft, done):
    """Insertions for the computed wrappers: the prototype before the first
    function that uses one (when its definition is not earlier in the file),
    and the mutex function after each wrapper defined here; and the start
    offsets of the functions these follow (for the includes)."""
    out, declared, anchors = [], set(), []
    firsts = {}
    for sec in done:
        w = getattr(sec, "wrapper", None)
        if w is not None:
            off = ft.line_start(sec.func.extent.start.offset)
            firsts[w] = min(off, firsts.get(w, off))
    for w, off in sorted(firsts.items(), key=lambda p: p[1]):
        d = ft.wrapper_defs.get(w)
        if d is not None and d.end < off:
            continue
        if d is not None:
            proto = d.proto
        else:
            proto = _proto_from_use(ft, w, done)
        out.append((off, off, f"{'static ' if d is not None and d.static else ''}{proto}; "
                              f"/* the mutex {w}() locks (liblock transform) */\n\n"))
        declared.add(w)
    for w, d in ft.wrapper_defs.items():
        if d.error:
            continue
        head = "static __attribute__((unused)) " if d.static else ""
        text = (f"\n\n/* the mutex {w}() locks, for liblock_execute_mutex (generated by liblock transform) */\n"
                + ("" if w in declared or d.static else f"{d.proto};\n")
                + f"{head}{d.proto}\n{{\n    return {d.expr};\n}}")
        out.append((d.end, d.end, text))
        anchors.append(ft.line_start(d.func.extent.start.offset))
    return out, anchors


def _proto_from_use(ft, w, done):
    """The prototype of w's mutex function from the declaration a call sees."""
    for sec in done:
        if getattr(sec, "wrapper", None) == w:
            st = sec.lock_stmt
            if st.kind == K.DO_STMT:
                st = list(list(st.get_children())[0].get_children())[0]
            call = strip(st)
            params = list(call.referenced.get_arguments()) if call.referenced is not None else []
            plist = ", ".join(f"{p.type.spelling} {p.spelling or f'a{i}'}" for i, p in enumerate(params)) or "void"
            return f"pthread_mutex_t *{mutex_fn(w)}({plist})"
    return f"pthread_mutex_t *{mutex_fn(w)}()"


def definition_ranges(ft):
    """{wrapper name: (file name, first line, last line)} of the lock
    wrappers defined in this file: a profiler names the lock call inside the
    wrapper as the call site (the caller of pthread_mutex_lock), and --only
    with such a site selects every section locked through the wrapper."""
    out = {}
    locks = {w[0] for w in ft.wrappers}
    for f in ft.tu.cursor.get_children():
        if f.kind == K.FUNCTION_DECL and f.is_definition() and ft.in_file(f) and f.spelling in locks:
            out[f.spelling] = (ft.path, f.extent.start.line, f.extent.end.line)
    return out
