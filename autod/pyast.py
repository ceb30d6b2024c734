"""`ast.parse` for every thread of the daemon, one parse at a time.

CPython 3.11 and 3.12 count the AST constructor's recursion depth in state shared by the whole
interpreter; two threads building an AST at once (the act rules in a worker thread, the localization
index in another) can end one of them with `SystemError: AST constructor recursion depth mismatch`
(python/cpython#106905; seen once in autod's kill-mid-apply test, which prepares plans in a thread
pool). Parsing is CPU work under the GIL either way, so serialising it costs nothing measurable; the
lock is re-entrant because a finalizer that runs during a parse may parse too.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse"]

_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)` (mode "exec"), never two threads at once. A NUL byte (a model's
    reply may hold one) is a SyntaxError naming its line: CPython's has no line (older releases
    raised ValueError instead), and a refusal's reason said "line None"."""
    nul = source.find("\x00" if isinstance(source, str) else b"\x00")
    if nul >= 0:
        before = source[:nul]
        line = before.count("\n" if isinstance(before, str) else b"\n") + 1
        col = nul - (before.rfind("\n" if isinstance(before, str) else b"\n") + 1) + 1
        raise SyntaxError("source code cannot contain null bytes", (filename, line, col, None))
    with _LOCK:
        return ast.parse(source, filename=filename)
