"""Hoisting for `liblock transform` (docs/transform.md, "Locals declared
inside a section and used after it").

The second most common shape of a critical section in C declares a local
inside the section and uses it after the unlock:

    pthread_mutex_lock(&m);
    struct node *n = head;
    if (n)
        head = n->next;
    pthread_mutex_unlock(&m);
    free(n);

The section's body moves into a function of its own, so `n` would not be
visible after the call any more.  Such a declaration is *hoisted*: it is
declared (without its initialiser) right before the section, in the same
block, and its initialiser becomes an assignment inside the section:

    struct node *n;
    { ... liblock_execute_mutex(&m, fn, &ctx) ... }   fn: (*ctx->n) = head; ...

so `n` is a local of the enclosing function like any other the section uses,
and reaches the section's function through its context struct.

What this preserves, and what is refused by name instead:
  - only a declaration that is a statement of the section itself (not of a
    block inside it) is hoisted: only those can be visible after the unlock
    (or in the code after an early unlock, which runs at the call site).
    All the variables of that declaration statement are hoisted together;
  - scope: the variable's scope now starts at the lock instead of at its
    declaration.  Between the two, the name could only have meant another
    declaration (an outer local, a global) that the hoisted one now hides:
    any use of the name there is refused;
  - the name is declared once in the section (a second declaration in a
    block inside would be rewritten as the hoisted one);
  - an initialiser becomes an assignment, which is the same thing for a
    scalar, a pointer or a struct (a braced initialiser becomes a compound
    literal `(T){...}`).  It is not the same, or not valid, for a `const`
    variable, an array with an initialiser, a variable-length array (its
    size is computed where it is declared), and `static`, `extern`,
    `register` or thread-local storage: those are refused.
"""
from clang import cindex as ci

from ._transform_common import Refused, decl_key

K = ci.CursorKind


class NeedHoist(Exception):
    """A local declared inside the section is used after it (or in the code
    after an early unlock, which runs at the call site)."""

    def __init__(self, decl, line, where):
        super().__init__(decl.spelling)
        self.decl, self.line, self.where = decl, line, where


def admit(ft, sec, stmts, h, hoist):
    """Add the declaration statement of h.decl to `hoist` (decl key -> VAR_DECL
    cursor), or raise Refused saying why it cannot be hoisted."""
    d = h.decl
    where = f"{h.where} (line {h.line})"
    stmt = None
    for s in stmts[sec.i + 1:sec.j]:
        if s.kind == K.DECL_STMT and any(decl_key(v) == decl_key(d) for v in s.get_children()):
            stmt = s
    if stmt is None:
        raise Refused(f"{d.spelling}, declared in a block inside the section, is used {where}")
    if decl_key(d) in hoist:  # cannot happen: a hoisted variable is not inside any more
        raise Refused(f"{d.spelling} could not be hoisted")
    inner = [x.spelling for s in stmts[sec.i + 1:sec.j] for x in s.walk_preorder() if x.kind == K.VAR_DECL]
    for v in stmt.get_children():
        if v.kind != K.VAR_DECL:
            raise Refused(f"{d.spelling}, declared inside the section and used {where}, is declared together "
                          f"with something other than a variable")
        n = v.spelling
        why = None
        if v.storage_class in (ci.StorageClass.STATIC, ci.StorageClass.EXTERN, ci.StorageClass.REGISTER):
            why = f"is {v.storage_class.name.lower()}"
        elif v.tls_kind != ci.TLSKind.NONE:
            why = "is thread-local"
        elif v.type.kind == ci.TypeKind.VARIABLEARRAY:
            why = "is a variable-length array (its size is computed where it is declared)"
        elif v.type.is_const_qualified():
            why = "is const (its initialiser cannot become an assignment)"
        elif v.type.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY) and init_of(ft, v):
            why = "is an array with an initialiser (which cannot become an assignment)"
        elif inner.count(n) > 1:
            why = "is declared more than once inside the section"
        if why:
            raise Refused(f"{n}, declared inside the section and used {where}, cannot be hoisted: it {why}")
        line = shadow_use(ft, sec, stmt, n)
        if line:
            raise Refused(f"{n}, declared inside the section and used {where}, cannot be hoisted: the name is "
                          f"used inside before its declaration (line {line}), where it means something else")
    for v in stmt.get_children():
        hoist[decl_key(v)] = v


def shadow_use(ft, sec, stmt, name):
    """Line of a use of `name` between the lock and the declaration (an
    identifier token, or a reference through a macro), None when there is
    none."""
    a, b = sec.bstart, stmt.extent.start.offset
    for s in sec.compound.get_children():
        if s.extent.end.offset <= a or s.extent.start.offset >= b:
            continue
        for x in s.walk_preorder():
            if x.kind == K.DECL_REF_EXPR and x.spelling == name and a <= x.location.offset < b:
                return x.location.line
    # written out (also in code the flags leave out), not in comments or strings
    f = sec.lock_stmt.extent.start.file
    ext = ci.SourceRange.from_locations(ci.SourceLocation.from_offset(ft.tu, f, a),
                                        ci.SourceLocation.from_offset(ft.tu, f, b))
    prev = None
    for t in ft.tu.get_tokens(extent=ext):
        sp = ft.spell(t)
        if t.kind == ci.TokenKind.IDENTIFIER and a <= t.extent.start.offset < b and sp == name \
                and prev not in (".", "->"):  # a member of that name is another name
            return t.location.line
        prev = sp
    return None


def init_of(ft, v):
    """(start offset of the initialiser, its cursor) of a VAR_DECL, None
    without one: the token after the declarator's `=` (outside brackets)."""
    depth = 0
    toks = list(v.get_tokens())
    for n, t in enumerate(toks):
        s = ft.spell(t)
        if s in ("(", "["):
            depth += 1
        elif s in (")", "]"):
            depth -= 1
        elif s == "=" and depth == 0 and n + 1 < len(toks):
            start = toks[n + 1].extent.start.offset
            init = [c for c in v.get_children() if c.extent.start.offset >= start]
            return start, (init[-1] if init else None)
    return None


def decl_text(d):
    """`T name` for a variable of d's type (the declaration before the section)."""
    t, n = d.type.spelling, d.spelling
    if "(*)" in t:
        return t.replace("(*)", f"(*{n})", 1)
    if "[" in t:
        b = t.index("[")
        return f"{t[:b].rstrip()} {n}{t[b:]}"
    return f"{t}{'' if t.endswith('*') else ' '}{n}"


def body_edits(ft, sec):
    """Edits of the section's body for its hoisted declarations: each
    declaration statement becomes the assignments of its initialisers
    (`(*__liblock_ctx->n) = head;`), or nothing.  Returns (edits, removed
    ranges) -- references to captured locals inside a removed range (the
    declarators) are not rewritten."""
    out, removed, seen = [], [], set()
    for v in sec.hoist.values():
        stmt = next(s for s in sec.compound.get_children()
                    if s.kind == K.DECL_STMT and s.extent.start.offset <= v.extent.start.offset < s.extent.end.offset)
        key = stmt.extent.start.offset
        if key in seen:
            continue
        seen.add(key)
        pos, first = stmt.extent.start.offset, True
        for x in stmt.get_children():
            it = init_of(ft, x)
            if not it:
                continue
            start, init = it
            cast = f"({x.type.spelling})" if init is not None and init.kind == K.INIT_LIST_EXPR else ""
            out.append((pos, start, f"{'' if first else ', '}(*__liblock_ctx->{x.spelling}) = {cast}"))
            removed.append((pos, start))
            pos, first = x.extent.end.offset, False
        end = stmt.extent.end.offset
        out.append((pos, end, "" if first else ";"))
        removed.append((pos, end))
    return out, removed


def declarations(sec):
    """The hoisted declarations, in order, for the call site."""
    vs = sorted(sec.hoist.values(), key=lambda v: v.extent.start.offset)
    return [decl_text(v) + ";" for v in vs]
