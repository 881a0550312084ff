"""The engine of `liblock transform` (docs/transform.md): find the critical
sections of one C file with libclang and turn each into a function run by
liblock_execute_mutex.

Shape handled: a statement `LOCK(E);` (pthread_mutex_lock, a macro expanding
to it, or a --wrapper) and the first statement `UNLOCK(E);` of the same mutex
expression later in the same compound statement.  Every local of the
enclosing function the body uses is passed by pointer in a context struct
(`x` becomes `(*__liblock_ctx->x)`), so inputs, outputs, arrays, structs and
address-taken locals are all right without data-flow analysis; the report
still classifies them.  `UNLOCK(E); ...; return/break/continue/goto` inside
the body is an early exit: the function returns its exit code and the call
site runs the statements after the unlock and the jump.  A local declared by
a statement of the section and used after it is hoisted before the section
(_transform_hoist.py).  Anything else the tool cannot prove right is refused
with a reason (docs/transform.md, "Refusals"); a section whose text holds
half of a preprocessor conditional is one of them.

The file is handled as bytes: apply() splices the original bytes at
libclang's byte offsets, so everything outside the edits is copied as it was,
and the text that moves is decoded with surrogateescape, which encodes back
to the same bytes.  transform.py compiles what apply() returns before
writing it."""
import os
import textwrap

from clang import cindex as ci

from . import _transform_hoist
from . import _transform_wrap
from ._transform_common import Refused, children, decl_key, strip

K = ci.CursorKind
LOCK = {"pthread_mutex_lock"}
UNLOCK = {"pthread_mutex_unlock"}
TRYLOCK = {"pthread_mutex_trylock"}
TLSCALLS = {"pthread_getspecific", "pthread_setspecific"}
CONDWAIT = {"pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait"}
SETJMP = {"setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp", "longjmp", "_longjmp", "siglongjmp",
          "__longjmp_chk", "__builtin_setjmp", "__builtin_longjmp"}
ALLOCA = {"alloca", "__builtin_alloca", "__builtin_alloca_with_align"}
VASTART = {"__builtin_va_start", "__builtin_c23_va_start", "__builtin_va_arg_pack", "__builtin_va_arg_pack_len"}
JUMPS = {K.RETURN_STMT: "return", K.BREAK_STMT: "break", K.CONTINUE_STMT: "continue", K.GOTO_STMT: "goto"}
LOOPS = {K.FOR_STMT, K.WHILE_STMT, K.DO_STMT}


def as_call(stmt):
    """(name, args) when stmt is a call expression, possibly cast to void."""
    c = strip(stmt)
    if c is not None and c.kind == K.CALL_EXPR:
        return c.spelling, list(c.get_arguments())
    return None


def is_local(d, func):
    return (d is not None and d.kind in (K.VAR_DECL, K.PARM_DECL) and d.semantic_parent is not None
            and d.semantic_parent.kind == K.FUNCTION_DECL)


def key_vars(key):
    """The declarations a mutex expression's key names."""
    if isinstance(key, tuple):
        if len(key) == 2 and key[0] == "v":
            yield key[1]
        else:
            for k in key:
                yield from key_vars(k)


class Section:
    def __init__(self, func, compound, i, j, lock_stmt, unlock_stmt, key, etext):
        self.func, self.compound, self.i, self.j = func, compound, i, j
        self.lock_stmt, self.unlock_stmt, self.key, self.etext = lock_stmt, unlock_stmt, key, etext
        self.line = lock_stmt.extent.start.line
        self.reason = None   # why the analysis refused it
        self.why = None      # the report's reason (also nested, or refused because the output did not compile)
        self.status = None
        self.hoist = {}      # decl key -> VAR_DECL declared inside, hoisted before the section
        self.captured = {}   # decl key -> decl cursor, in first-use order
        self.reads, self.writes, self.addr = set(), set(), set()
        self.after = set()   # captured decls referenced after the section
        self.exits = []      # dicts: code, kind, start, end, post (text), line
        self.waits = False
        self.nested = []
        self.refs = []       # (start, end, decl key) of captured references in the body
        self.any_writes = set()  # every variable assigned inside (locals and globals)


class FileTransform:
    def __init__(self, path, flags, wrappers, index=None, src=None):
        self.path = os.path.abspath(path)
        self.given = path
        if src is None:
            with open(path, "rb") as f:
                src = f.read()
        # The file is bytes from here to the output: libclang's offsets are
        # byte offsets, the text outside the rewritten sections is copied as
        # bytes, and what is moved is decoded with surrogateescape, which
        # gives back the same bytes (a Latin-1 "\xe9" stays one byte 0xe9).
        self.src = src
        # the line ending of the generated text: CRLF when every line of the
        # file ends so, otherwise LF (text moved keeps its own endings)
        self.nl = "\r\n" if b"\r\n" in src and src.count(b"\r\n") == src.count(b"\n") else "\n"
        self.lock_names = set(LOCK) | {w[0] for w in wrappers}
        self.unlock_names = set(UNLOCK) | {w[1] for w in wrappers}
        self.wrappers = list(wrappers)
        self.wrap_pair = {n: i for i, w in enumerate(wrappers) for n in w}
        self.wrapper_defs = {}   # computed lock wrapper defined here -> _transform_wrap.WrapperDef
        index = index or ci.Index.create()
        # parsed from the bytes read (not re-read from the disk)
        self.tu = index.parse(path, args=list(flags), unsaved_files=[(path, src)],
                              options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
        self.errors = [d for d in self.tu.diagnostics if d.severity >= ci.Diagnostic.Error]
        self.sections = []

    # ---- source text helpers --------------------------------------------------
    def in_file(self, c):
        f = c.extent.start.file
        return f is not None and os.path.abspath(f.name) == self.path

    def text(self, a, b):
        return self.src[a:b].decode("utf-8", "surrogateescape")

    def spell(self, t):
        """A token's spelling, from the file's bytes when it is in this file
        (libclang's own spelling is decoded as strict UTF-8 by its Python
        bindings, which fails on a Latin-1 string literal)."""
        f = t.extent.start.file
        if f is not None and os.path.abspath(f.name) == self.path:
            return self.text(t.extent.start.offset, t.extent.end.offset)
        try:
            return t.spelling
        except UnicodeDecodeError:
            return ""

    def line_of(self, off):
        return self.src.count(b"\n", 0, off) + 1

    def conditionals(self, a, b):
        """None when the preprocessor conditionals between offsets a and b
        are balanced (every #if opened there is closed there, and none of
        an enclosing one is continued or closed there), else the line of
        the first directive that is not."""
        opened, pos = [], self.line_start(a)
        for raw in self.src[pos:b].split(b"\n"):
            line = raw.lstrip(b" \t")
            if line.startswith(b"#") and pos + (len(raw) - len(line)) >= a:
                word = line[1:].lstrip(b" \t").split(None, 1)
                word = word[0] if word else b""
                if word in (b"if", b"ifdef", b"ifndef"):
                    opened.append(pos)
                elif word in (b"elif", b"else", b"elifdef", b"elifndef", b"endif") and not opened:
                    return self.line_of(pos)
                elif word == b"endif":
                    opened.pop()
            pos += len(raw) + 1
        return self.line_of(opened[0]) if opened else None

    def stmt_end(self, c):
        """End offset of a statement including its ';' when it has one."""
        e = c.extent.end.offset
        k = e
        while k < len(self.src) and self.src[k:k + 1] in (b" ", b"\t", b"\r", b"\n"):
            k += 1
        return k + 1 if self.src[k:k + 1] == b";" else e

    def line_start(self, off):
        return self.src.rfind(b"\n", 0, off) + 1

    def indent_at(self, off):
        s = self.line_start(off)
        k = s
        while k < len(self.src) and self.src[k:k + 1] in (b" ", b"\t"):
            k += 1
        return self.text(s, k)

    def site(self, line):
        return f"{os.path.basename(self.path)}:{line}"

    # ---- mutex expressions --------------------------------------------------------
    def canon(self, c):
        """(key, text) of a mutex expression; key compares structure and
        declarations, text re-prints it (macro bodies have no source text).
        Raises Refused for what it cannot print."""
        c = strip(c)
        k = c.kind
        if k == K.DECL_REF_EXPR:
            d = c.referenced
            return ("v", decl_key(d)), d.spelling
        if k == K.MEMBER_REF_EXPR:
            base = children(c)[0]
            arrow = base.type.get_canonical().kind == ci.TypeKind.POINTER
            bk, bt = self.canon(base)
            return ("m", c.spelling, arrow, bk), f"{bt}{'->' if arrow else '.'}{c.spelling}"
        if k == K.ARRAY_SUBSCRIPT_EXPR:
            a, b = children(c)
            ak, at = self.canon(a)
            bk, bt = self.canon(b)
            return ("[", ak, bk), f"{at}[{bt}]"
        if k == K.UNARY_OPERATOR:
            (x,) = children(c)
            rt, xt = c.type.get_canonical(), x.type.get_canonical()
            xk, xtext = self.canon(x)
            if rt.kind == ci.TypeKind.POINTER and rt.get_pointee().spelling == xt.spelling:
                return ("&", xk), f"&{xtext}"
            if xt.kind == ci.TypeKind.POINTER and xt.get_pointee().spelling == rt.spelling:
                return ("*", xk), f"(*{xtext})"
        if k == K.INTEGER_LITERAL:
            toks = [self.spell(t) for t in c.get_tokens()]
            if len(toks) == 1:
                return ("i", toks[0]), toks[0]
        raise Refused(f"mutex expression not understood ({k.name.lower()})")

    def mutex_of(self, stmt, names):
        """(key, text) when stmt is `NAME(E);` for NAME in names (also the
        `do { NAME(E); } while (0)` of a macro)."""
        if stmt.kind == K.DO_STMT:
            ch = children(stmt)
            if len(ch) == 2 and ch[0].kind == K.COMPOUND_STMT and len(children(ch[0])) == 1:
                stmt = children(ch[0])[0]
        call = strip(stmt)
        if call is None or call.kind != K.CALL_EXPR or call.spelling not in names:
            return None
        try:
            return self.call_mutex(call)
        except Refused:
            return ("?", stmt.extent.start.offset), None

    def call_mutex(self, call):
        """(key, text) of the mutex a lock/unlock call names, None when it is
        not one (a plain lock with other than one argument).  A computed
        wrapper (--wrapper whose function takes something other than one
        `pthread_mutex_t *`, like memcached's item_lock(hv)) is keyed by its
        pair and its argument list, and its mutex is
        __liblock_mutex_LOCK(args) (_transform_wrap.py)."""
        args = list(call.get_arguments())
        if call.spelling in self.wrap_pair and _transform_wrap.computed(call):
            i = self.wrap_pair[call.spelling]
            canon = [self.canon(a) for a in args]
            return ("w", i, tuple(k for k, _ in canon)), \
                f"{_transform_wrap.mutex_fn(self.wrappers[i][0])}({', '.join(t for _, t in canon)})"
        if len(args) != 1:
            return None
        return self.canon(args[0])

    # ---- discovery ------------------------------------------------------------------
    def waiting_functions(self):
        """Functions defined in this file that may wait on a condition
        variable: those that call pthread_cond_*wait, and, transitively,
        those that call them (calls through pointers or into other files are
        not followed: docs/transform.md)."""
        calls, waits = {}, set()
        for f in self.tu.cursor.get_children():
            if f.kind == K.FUNCTION_DECL and f.is_definition():
                names = {c.spelling for c in f.walk_preorder() if c.kind == K.CALL_EXPR}
                calls[f.spelling] = names
                if names & CONDWAIT:
                    waits.add(f.spelling)
        changed = True
        while changed:
            changed = False
            for f, names in calls.items():
                if f not in waits and names & waits:
                    waits.add(f)
                    changed = True
        return waits

    def run(self):
        if self.errors:
            return
        self.waiters = self.waiting_functions()
        self.wrapper_defs = _transform_wrap.find_definitions(self)
        for f in self.tu.cursor.get_children():
            if f.kind == K.FUNCTION_DECL and f.is_definition() and self.in_file(f) \
                    and f.spelling not in self.wrap_pair:  # a wrapper's own body is not a section
                body = [c for c in children(f) if c.kind == K.COMPOUND_STMT]
                if body:
                    self.scan(f, body[0])
        self.sections.sort(key=lambda s: s.lock_stmt.extent.start.offset)

    def scan(self, func, c):
        if c.kind == K.COMPOUND_STMT:
            stmts = children(c)
            for i, s in enumerate(stmts):
                m = self.mutex_of(s, self.lock_names)
                if m:
                    self.pair(func, c, stmts, i, m)
        for ch in c.get_children():
            # not inside a `do { LOCK(l); } while (0)` macro's own block
            if ch.kind == K.DO_STMT and (self.mutex_of(ch, self.lock_names) or self.mutex_of(ch, self.unlock_names)):
                continue
            self.scan(func, ch)

    def pair(self, func, compound, stmts, i, m):
        key, etext = m
        other = None
        for j in range(i + 1, len(stmts)):
            u = self.mutex_of(stmts[j], self.unlock_names)
            if u and u[0] == key and etext is not None:
                hoist = {}
                while True:
                    # analysed again with each declaration that must be hoisted
                    # (_transform_hoist.py): a hoisted local is one of the caller's
                    sec = Section(func, compound, i, j, stmts[i], stmts[j], key, etext)
                    sec.hoist = hoist
                    try:
                        self.analyse(sec, stmts)
                    except _transform_hoist.NeedHoist as h:
                        try:
                            _transform_hoist.admit(self, sec, stmts, h, hoist)
                            continue
                        except Refused as e:
                            sec.reason = str(e)
                    except Refused as e:
                        sec.reason = str(e)
                    break
                self.sections.append(sec)
                return
            if u and other is None:
                other = stmts[j]
            if self.mutex_of(stmts[j], self.lock_names) and self.mutex_of(stmts[j], self.lock_names)[0] == key:
                break
        sec = Section(func, compound, i, i, stmts[i], stmts[i], key, etext or "?")
        if etext is None:
            sec.reason = "mutex expression not understood (only names, members, subscripts, & and *)"
        elif other is not None:
            sec.reason = f"unlocked through a different mutex expression (line {other.extent.start.line})"
        else:
            sec.reason = "no unlock of the same mutex later in the same compound statement"
        self.sections.append(sec)

    # ---- analysis of one section ------------------------------------------------------
    def analyse(self, sec, stmts):
        body = stmts[sec.i + 1:sec.j]
        sec.bstart = self.stmt_end(sec.lock_stmt)
        sec.bend = sec.unlock_stmt.extent.start.offset
        sec.start, sec.end = sec.lock_stmt.extent.start.offset, self.stmt_end(sec.unlock_stmt)
        if not self.in_file(sec.lock_stmt) or not self.in_file(sec.unlock_stmt):
            raise Refused("lock or unlock not in this file")
        if not (sec.start < sec.bstart <= sec.bend < sec.end) or any(
                s.kind != K.NULL_STMT and not (sec.bstart <= s.extent.start.offset and s.extent.end.offset <= sec.bend)
                for s in body):
            raise Refused("the section is written inside a macro")
        line = self.conditionals(sec.start, sec.end)
        if line:
            # `#ifdef USE_LOCK` around the lock and around the unlock: the body
            # would move into the function with half of each conditional
            raise Refused(f"the lock and the unlock are not inside the same preprocessor conditionals "
                          f"(line {line})")
        st = sec.lock_stmt
        if st.kind == K.DO_STMT:
            st = children(children(st)[0])[0]
        sec.lock_fn = strip(st).spelling  # pthread_mutex_lock or a --wrapper (--only by the wrapper's site)
        if sec.key[0] == "w":
            _transform_wrap.check_section(self, sec, strip(st))
        else:
            arg = strip(as_call(st)[1][0])
            pt = arg.type.get_canonical()
            if pt.kind != ci.TypeKind.POINTER or "pthread_mutex_t" not in (arg.type.get_pointee().spelling + " " +
                                                                          pt.get_pointee().spelling):
                raise Refused(f"the lock's argument is not a pthread_mutex_t * ({arg.type.spelling})")
        self.held = [sec.key]
        self.pure_writes = set()
        sec.inner_names = {x.spelling for s in body for x in s.walk_preorder()
                           if x.kind == K.VAR_DECL and decl_key(x) not in sec.hoist}
        for v in sorted(sec.hoist.values(), key=lambda v: v.extent.start.offset):
            # a hoisted local is the caller's; its initialiser writes it inside
            sec.captured[decl_key(v)] = v
            if _transform_hoist.init_of(self, v):
                sec.writes.add(decl_key(v))
        self.held_line = {}
        for s in body:
            self.walk(sec, s, 0, 0)
        for e in sec.exits:
            line = self.conditionals(e["start"], e["end"])
            if line:
                raise Refused(f"the code after the unlock at line {e['line']} is not inside the same "
                              f"preprocessor conditionals (line {line})")
        left = [k for k in self.held if k != sec.key]
        if left:
            # a delegated section runs on a server thread: a lock it leaves held
            # cannot be released by the caller afterwards (docs/transform.md)
            line, text = self.held_line.get(left[0], (sec.line, "?"))
            raise Refused(f"locks {text} inside (line {line}) and does not unlock it before the section ends")
        self.raw_names(sec)
        for v in key_vars(sec.key):
            if v in sec.any_writes:
                raise Refused(f"{v[0]}, named in the mutex expression, is assigned inside")
        fstart, fend = sec.func.extent.start.offset, sec.func.extent.end.offset
        # goto into the section; locals declared inside used after it; reads after
        self.after_pass(sec, sec.func, fstart, fend)
        for d in sec.captured.values():
            t = d.type
            if t.kind == ci.TypeKind.VARIABLEARRAY:
                raise Refused(f"uses the variable-length array {d.spelling}")
            if d.storage_class == ci.StorageClass.REGISTER:
                raise Refused(f"uses the register variable {d.spelling}")
            base = t
            while base.kind in (ci.TypeKind.POINTER, ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
                base = base.get_pointee() if base.kind == ci.TypeKind.POINTER else base.element_type
            decl = base.get_declaration()
            if decl is not None and decl.kind != K.NO_DECL_FOUND and decl.semantic_parent is not None \
                    and decl.semantic_parent.kind == K.FUNCTION_DECL:
                raise Refused(f"{d.spelling} has a type declared inside the function")
            if "(unnamed" in t.spelling or "(anonymous" in t.spelling:
                raise Refused(f"{d.spelling} has an unnamed type")

    @staticmethod
    def inside(sec, d):
        """d is declared inside the section (and not hoisted out of it)."""
        return sec.bstart <= d.extent.start.offset < sec.bend and decl_key(d) not in sec.hoist

    def refname(self, c):
        """(decl, offset) of a DeclRef whose name is spelled in this file at
        that offset (directly, or as a macro's argument); offset None when
        the name comes from a macro's body."""
        d = c.referenced
        loc = c.location
        if loc.file is None or os.path.abspath(loc.file.name) != self.path:
            return d, None
        o, n = loc.offset, d.spelling.encode()
        ident = lambda b: b.isalnum() or b == b"_"  # noqa: E731
        if self.src[o:o + len(n)] != n or (o > 0 and ident(self.src[o - 1:o])) or \
                ident(self.src[o + len(n):o + len(n) + 1]):
            return d, None
        return d, o

    def raw_names(self, sec):
        """Names the compiler did not see with these flags (an argument that
        a macro drops, like assert's under NDEBUG; an inactive #if branch)
        are still in the text: an identifier spelled like a captured local
        is rewritten too, so the output builds in every configuration; one
        spelled like another local of the function is refused."""
        names = {d.spelling: k for k, d in sec.captured.items()}
        others = {x.spelling for x in sec.func.walk_preorder()
                  if x.kind in (K.VAR_DECL, K.PARM_DECL) and not (sec.bstart <= x.extent.start.offset < sec.bend)}
        ext = ci.SourceRange.from_locations(
            ci.SourceLocation.from_offset(self.tu, sec.lock_stmt.extent.start.file, sec.bstart),
            ci.SourceLocation.from_offset(self.tu, sec.lock_stmt.extent.start.file, sec.bend))
        prev = None
        have = {r[0] for r in sec.refs}
        for t in self.tu.get_tokens(extent=ext):
            o = t.extent.start.offset
            sp = self.spell(t)
            if t.kind == ci.TokenKind.IDENTIFIER and sec.bstart <= o < sec.bend and prev not in (".", "->") \
                    and sp not in sec.inner_names and o not in have:
                if sp in names:
                    if any(e["start"] <= o < e["end"] for e in sec.exits):
                        pass  # code after an inner unlock stays at the call site
                    else:
                        sec.refs.append((o, o + len(sp.encode()), names[sp]))
                elif sp in others and not self.seen_as_other(sec, sp):
                    raise Refused(f"{sp}, a local of {sec.func.spelling}(), appears inside in code "
                                  f"not compiled with these flags (line {t.location.line})")
            prev = sp

    def seen_as_other(self, sec, name):
        """True when `name` is used inside as something the compiler saw
        (a global, a function, a member) rather than as a local."""
        for x in sec.compound.walk_preorder():
            if x.kind == K.DECL_REF_EXPR and x.spelling == name and sec.bstart <= x.extent.start.offset < sec.bend:
                return not is_local(x.referenced, sec.func)
        return False

    def macro_arg_refs(self, at, name):
        """Offsets of the identifier `name` in the arguments of the
        function-like macro invocation starting at `at` (not after . or ->);
        [] when `at` is not such an invocation."""
        src, n = self.src, len(self.src)
        ident = lambda b: b.isalnum() or b == b"_"  # noqa: E731
        k = at
        while k < n and ident(src[k:k + 1]):
            k += 1
        if k == at:
            return []
        while k < n and src[k:k + 1] in (b" ", b"\t", b"\n", b"\r"):
            k += 1
        if src[k:k + 1] != b"(":
            return []
        depth, k, out, word = 0, k, [], name.encode()
        while k < n:
            ch = src[k:k + 1]
            if ch in (b'"', b"'"):
                q, k = ch, k + 1
                while k < n and src[k:k + 1] != q:
                    k += 2 if src[k:k + 1] == b"\\" else 1
            elif ch == b"(":
                depth += 1
            elif ch == b")":
                depth -= 1
                if depth == 0:
                    return out
            elif ident(ch) and not ident(src[k - 1:k]):
                e = k
                while e < n and ident(src[e:e + 1]):
                    e += 1
                if src[k:e] == word:
                    p = k - 1
                    while p > 0 and src[p:p + 1] in (b" ", b"\t", b"\n"):
                        p -= 1
                    if src[p:p + 1] != b"." and src[p - 1:p + 1] != b"->":
                        out.append(k)
                k = e
                continue
            k += 1
        return []

    def root_var(self, c):
        """The local whose storage an lvalue names (through . and array subscripts)."""
        c = strip(c)
        while c is not None:
            if c.kind == K.DECL_REF_EXPR:
                return c.referenced
            if c.kind == K.MEMBER_REF_EXPR:
                base = children(c)[0]
                if base.type.get_canonical().kind == ci.TypeKind.POINTER:
                    return None
                c = strip(base)
            elif c.kind == K.ARRAY_SUBSCRIPT_EXPR:
                base = children(c)[0]
                if strip(base).type.get_canonical().kind == ci.TypeKind.POINTER:
                    return None
                c = strip(base)
            else:
                return None
        return None

    def op_token(self, c, after):
        for t in c.get_tokens():
            if t.extent.start.offset >= after:
                return self.spell(t)
        return None

    def walk(self, sec, c, loops, switches):
        k = c.kind
        if k == K.DECL_REF_EXPR:
            r = c.referenced
            if r is not None and r.kind == K.VAR_DECL and r.tls_kind != ci.TLSKind.NONE:
                raise Refused(f"uses the thread-local variable {r.spelling} (a delegated section runs on the "
                              f"server's thread)")
            d, off = self.refname(c)
            if is_local(d, sec.func) and not self.inside(sec, d):
                offs = [off] if off is not None else []
                if off is None and d.spelling not in sec.inner_names:
                    # the name reached the expansion through a macro's arguments
                    offs = self.macro_arg_refs(c.location.offset, d.spelling)
                if not offs or not all(sec.bstart <= o < sec.bend for o in offs):
                    raise Refused(f"a macro inside uses {d.spelling}, a local of {sec.func.spelling}()")
                sec.captured.setdefault(decl_key(d), d)
                if c.extent.start.offset not in self.pure_writes:
                    sec.reads.add(decl_key(d))
                for o in offs:
                    ref = (o, o + len(d.spelling.encode()), decl_key(d))
                    if ref not in sec.refs:  # a macro may expand its argument twice
                        sec.refs.append(ref)
            return
        if k in (K.CASE_STMT, K.DEFAULT_STMT) and switches == 0:
            raise Refused(f"a case label of a switch outside is inside (line {c.extent.start.line})")
        if k == K.VAR_DECL:
            if c.type.kind == ci.TypeKind.VARIABLEARRAY:
                raise Refused(f"declares the variable-length array {c.spelling}")
        if k == K.BINARY_OPERATOR or k == K.COMPOUND_ASSIGNMENT_OPERATOR:
            ch = children(c)
            op = "=" if k == K.COMPOUND_ASSIGNMENT_OPERATOR else self.op_token(c, ch[0].extent.end.offset)
            if op == "=":
                r = self.root_var(ch[0])
                if r is not None:
                    sec.any_writes.add(decl_key(r))
                if r is not None and is_local(r, sec.func):
                    sec.writes.add(decl_key(r))
                    if k == K.BINARY_OPERATOR and strip(ch[0]).kind == K.DECL_REF_EXPR:
                        self.pure_writes.add(strip(ch[0]).extent.start.offset)
        if k == K.UNARY_OPERATOR:
            ch = children(c)
            toks = [self.spell(t) for t in c.get_tokens()]
            if ch and toks and (toks[0] in ("++", "--", "&") or toks[-1] in ("++", "--")):
                r = self.root_var(ch[0])
                if r is not None and toks[0] != "&":
                    sec.any_writes.add(decl_key(r))
                if r is not None and is_local(r, sec.func):
                    (sec.addr if toks[0] == "&" else sec.writes).add(decl_key(r))
        if k == K.CALL_EXPR:
            name, args = c.spelling, list(c.get_arguments())
            if name in SETJMP:
                raise Refused(f"calls {name}")
            if name in ALLOCA:
                raise Refused(f"calls {name}")
            if name in TLSCALLS:
                raise Refused(f"calls {name} (a delegated section runs on the server's thread)")
            if name in VASTART:
                raise Refused("va_start inside: the variable arguments are the enclosing function's")
            if name in self.waiters:
                sec.waits = True  # conservatively: it may wait with this section's mutex
            if name in CONDWAIT and len(args) >= 2:
                try:
                    if self.canon(args[1])[0] == sec.key:
                        sec.waits = True
                except Refused:
                    pass
            if name in self.lock_names or name in TRYLOCK:
                try:
                    m = self.call_mutex(c) if name in self.lock_names else \
                        (self.canon(args[0]) if len(args) == 1 else None)
                except Refused:
                    raise Refused("a lock inside with a mutex expression not understood")
                if m is not None:
                    self.held.append(m[0])
                    self.held_line.setdefault(m[0], (c.extent.start.line, m[1]))
                    if name in self.lock_names:
                        sec.nested.append(c.extent.start.line)
            if name in self.unlock_names and self.call_mutex(c) is not None:
                key = self.call_mutex(c)[0]
                if key not in self.held:
                    raise Refused(f"unlocks another mutex inside (line {c.extent.start.line})")
                if key == sec.key:
                    raise Refused(f"unlock at line {c.extent.start.line} does not end the section "
                                  f"(only `unlock; ...; return/break/continue/goto` inside)")
                self.held.remove(key)
        if k in JUMPS:
            kind = JUMPS[k]
            if kind == "return":
                raise Refused(f"returns with the lock held (line {c.extent.start.line})")
            if kind == "goto":
                lab = [x for x in c.get_children() if x.kind == K.LABEL_REF]
                if lab and not (sec.bstart <= lab[0].referenced.extent.start.offset < sec.bend):
                    raise Refused(f"goto out with the lock held (line {c.extent.start.line})")
            if kind == "break" and loops == 0 and switches == 0 or kind == "continue" and loops == 0:
                raise Refused(f"{kind} out with the lock held (line {c.extent.start.line})")
        if k == K.COMPOUND_STMT:
            self.walk_compound(sec, c, loops, switches)
            return
        nl = loops + (1 if k in LOOPS else 0)
        ns = switches + (1 if k == K.SWITCH_STMT else 0)
        for ch in c.get_children():
            self.walk(sec, ch, nl, ns)

    def walk_compound(self, sec, c, loops, switches):
        stmts = children(c)
        n = 0
        while n < len(stmts):
            s = stmts[n]
            u = self.mutex_of(s, self.unlock_names)
            if u and u[0] == sec.key:
                # early exit: unlock; post...; jump
                v = n + 1
                while v < len(stmts) and stmts[v].kind not in JUMPS:
                    v += 1
                if v == len(stmts):
                    raise Refused(f"unlock at line {s.extent.start.line} is not followed by "
                                  f"return/break/continue/goto in its block")
                jump = stmts[v]
                kind = JUMPS[jump.kind]
                if kind == "break" and (loops or switches) or kind == "continue" and loops:
                    raise Refused(f"{kind} at line {jump.extent.start.line} after an unlock does not leave "
                                  f"the section")
                for p in stmts[n + 1:v + 1]:
                    self.check_post(sec, p, s.extent.start.line)
                if not self.in_file(s) or not self.in_file(jump):
                    raise Refused("early exit written inside a macro")
                start, end = s.extent.start.offset, self.stmt_end(jump)
                sec.exits.append({"code": len(sec.exits) + 2, "kind": kind, "line": s.extent.start.line,
                                  "start": start, "end": end,
                                  "post": self.text(self.stmt_end(s), end).strip()})
                n = v + 1
                continue
            self.walk(sec, s, loops, switches)
            n += 1

    def check_post(self, sec, c, unlock_line):
        """Code after an inner unlock runs at the call site: it must not use
        the section's own locals, nor jump into it."""
        for x in c.walk_preorder():
            if x.kind == K.DECL_REF_EXPR:
                d = x.referenced
                if is_local(d, sec.func) and self.inside(sec, d):
                    raise _transform_hoist.NeedHoist(d, x.extent.start.line, f"in the code after the unlock at line "
                                                                f"{unlock_line}")
                if is_local(d, sec.func):
                    sec.after.add(decl_key(d))
            if x.kind == K.LABEL_REF and sec.bstart <= x.referenced.extent.start.offset < sec.bend:
                raise Refused(f"goto at line {x.extent.start.line} after an unlock jumps back inside")

    def after_pass(self, sec, func, fstart, fend):
        for x in func.walk_preorder():
            off = x.extent.start.offset
            inside = sec.bstart <= off < sec.bend
            if x.kind == K.GOTO_STMT and not inside:
                lab = [y for y in x.get_children() if y.kind == K.LABEL_REF]
                if lab and sec.bstart <= lab[0].referenced.extent.start.offset < sec.bend:
                    raise Refused(f"goto into the section from line {x.extent.start.line}")
            if x.kind == K.DECL_REF_EXPR and off >= sec.end and self.in_file(x):
                d = x.referenced
                if is_local(d, func):
                    if self.inside(sec, d):
                        raise _transform_hoist.NeedHoist(d, x.extent.start.line, "after the section")
                    sec.after.add(decl_key(d))
            if x.kind == K.LABEL_STMT and inside:
                pass

    # ---- output -------------------------------------------------------------------------
    @staticmethod
    def field(d):
        """Declaration of a pointer-to-d's-type field named like d."""
        t = d.type.spelling
        n = d.spelling
        if "(*)" in t:
            return t.replace("(*)", f"(**{n})", 1)
        if "[" in t:
            b = t.index("[")
            return f"{t[:b].rstrip()} (*{n}){t[b:]}"
        return f"{t} *{n}"

    def names(self, sec):
        f = sec.func.spelling
        return f"__liblock_cs_{f}_{sec.line}", f"__liblock_ctx_{f}_{sec.line}"

    def generate(self, sec):
        fn, st = self.names(sec)
        hedits, removed = _transform_hoist.body_edits(self, sec)
        body_edits = [(a, b, f"(*__liblock_ctx->{sec.captured[k].spelling})") for a, b, k in sec.refs
                      if not any(e["start"] <= a < e["end"] for e in sec.exits)
                      and not any(x <= a < y for x, y in removed)]
        body_edits += [(e["start"], e["end"], f"return (void *)(uintptr_t){e['code']};") for e in sec.exits]
        body_edits += hedits
        body_edits.sort()
        out, pos = [], sec.bstart
        for a, b, r in body_edits:
            out.append(self.text(pos, a))
            out.append(r)
            pos = b
        out.append(self.text(pos, sec.bend))
        body = "".join(out).rstrip()
        if self.nl == "\r\n":  # dedented as LF lines; apply() gives every inserted line the file's ending
            body = body.replace("\r\n", "\n")
        caps = list(sec.captured.values())
        lines = [f"/* {self.site(sec.line)}: critical section of {sec.func.spelling}() on {sec.etext}, "
                 f"generated by liblock transform */"]
        if caps:
            lines.append(f"struct {st} {{")
            lines += [f"    {self.field(d)};" for d in caps]
            lines.append("};")
        lines.append(f"static void *{fn}(void *__liblock_arg)")
        lines.append("{")
        if caps:
            lines.append(f"    struct {st} *__liblock_ctx = __liblock_arg;")
        else:
            lines.append("    (void)__liblock_arg;")
        if body.strip():
            lines.append(textwrap.indent(textwrap.dedent(body.lstrip("\n")), "    "))
        lines.append("    return (void *)(uintptr_t)1;")
        lines.append("}")
        lines.append("")
        gen = "\n".join(lines) + "\n"
        # call site
        i0 = self.indent_at(sec.start)
        call = "liblock_execute_mutex_cond" if sec.waits else "liblock_execute_mutex"
        # hoisted declarations (_transform_hoist.py) go right before the section
        site = [f"{d}\n{i0}" for d in _transform_hoist.declarations(sec)]
        site = ["".join(site) + "{"]
        ctxarg = "NULL"
        if caps:
            site.append(f"{i0}    struct {st} __liblock_ctx = {{{', '.join('&' + d.spelling for d in caps)}}};")
            ctxarg = "&__liblock_ctx"
        site.append(f"{i0}    uintptr_t __liblock_r = (uintptr_t){call}({sec.etext}, {fn}, {ctxarg});")
        site.append(f"{i0}    if (__liblock_r == 0)")
        site.append(f"{i0}        abort(); /* the critical section could not be run (errno says why) */")
        for e in sec.exits:
            site.append(f"{i0}    if (__liblock_r == {e['code']}) {{ /* early exit, line {e['line']} */")
            site.append(f"{i0}        {e['post']}")
            site.append(f"{i0}    }}")
        site.append(f"{i0}}}")
        return gen, "\n".join(site)

    def report_entry(self, sec):
        name = lambda k: sec.captured[k].spelling if k in sec.captured else k[0]  # noqa: E731
        caps = list(sec.captured)
        arrays = {k for k in caps if sec.captured[k].type.get_canonical().kind in
                  (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.RECORD)}
        e = {"site": self.site(sec.line), "file": self.given, "line": sec.line,
             "function": sec.func.spelling, "mutex": sec.etext, "status": sec.status,
             "inputs": [name(k) for k in caps if k in sec.reads],
             "outputs": [name(k) for k in caps if (k in sec.writes or k in sec.addr or k in arrays)
                         and k in sec.after],
             "by_address": [name(k) for k in caps if k in sec.addr or k in arrays],
             "exits": [{"line": x["line"], "kind": x["kind"], "code": x["code"]} for x in sec.exits],
             "waits": sec.waits,
             "hoisted": [v.spelling for v in sorted(sec.hoist.values(), key=lambda v: v.extent.start.offset)]
             if getattr(sec, "hoist", None) and sec.status == "transformed" else []}
        if sec.status == "transformed":
            e["generated"] = self.names(sec)[0]
        if sec.why:
            e["reason"] = sec.why
        return e

    def apply(self, selected, forced=None):
        """Decide per section and return (the new bytes, None when unchanged;
        the regions of the output each transformed section wrote, as
        (start, end, section), None for the include block and the wrappers'
        functions).  `forced`: {section: reason} refused after the analysis
        (their output did not compile)."""
        forced = forced or {}
        edits, done = [], []
        for sec in self.sections:
            sec.why = sec.reason
            if sec.reason or sec in forced:
                sec.status, sec.why = "refused", sec.reason or forced[sec]
                continue
            outer = [d for d in done if d.start <= sec.start < d.end]
            if outer:
                sec.status = "nested"
                sec.why = f"inside the section at line {outer[0].line}, transformed with it"
                continue
            if not selected(sec):
                sec.status = "skipped"
                continue
            gen, site = self.generate(sec)
            fstart = self.line_start(sec.func.extent.start.offset)
            edits.append((fstart, fstart, gen, sec))
            edits.append((sec.start, sec.end, site, sec))
            sec.status = "transformed"
            done.append(sec)
        wedits, anchors = _transform_wrap.edits(self, done)
        edits = [(a, b, r, None) for a, b, r in wedits] + edits  # the mutex functions of computed wrappers first
        if not edits:
            return None, []
        # the includes go before the first function changed (a function's start, never inside one)
        first = min([self.line_start(sec.func.extent.start.offset) for sec in done] + anchors)
        # (offset, order): the include block first, then insertions in the order made
        keyed = [((first, -1), (first, first, "#include <liblock.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n",
                                None))]
        keyed += [((e[0], n), e) for n, e in enumerate(edits)]
        keyed.sort(key=lambda p: p[0])
        # bytes outside the edits are copied as they are; the inserted text
        # takes the file's line ending
        out, pos, size, regions = [], 0, 0, []
        for _, (a, b, r, sec) in keyed:
            out.append(self.src[pos:a])
            size += a - pos
            if self.nl != "\n":
                r = r.replace("\r\n", "\n").replace("\n", self.nl)
            r = r.encode("utf-8", "surrogateescape")
            out.append(r)
            regions.append((size, size + len(r), sec))
            size += len(r)
            pos = b
        out.append(self.src[pos:])
        return b"".join(out), regions
