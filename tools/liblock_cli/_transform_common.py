"""What the engine of `liblock transform` (_transform_c.py) and its helpers
(_transform_hoist.py, _transform_wrap.py) share: the exception that refuses
a section with its reason, the key naming one declaration, and how a
cursor is looked through."""
from clang import cindex as ci

K = ci.CursorKind


class Refused(Exception):
    """A critical section the tool will not transform; the message says why."""


def decl_key(d):
    """A declaration's identity across cursors: its name, file and offset."""
    f = d.location.file
    return (d.spelling, f.name if f else "", d.location.offset)


def children(c):
    return list(c.get_children())


def strip(c):
    """Skip implicit casts, parentheses and (void) casts."""
    while c is not None and c.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR, K.CSTYLE_CAST_EXPR):
        ch = children(c)
        if not ch:
            break
        c = ch[-1]
    return c
