"""`ast.parse` for every thread of the daemon, one parse at a time.

CPython 3.11 and 3.12 count the AST constructor's recursion depth in state shared by the whole
interpreter; two threads building an AST at once (the act rules in a worker thread, the localization
index in another) can end one of them with `SystemError: AST constructor recursion depth mismatch`
(python/cpython#106905; seen once in autod's kill-mid-apply test, which prepares plans in a thread
pool). Parsing is CPU work under the GIL either way, so serialising it costs nothing measurable; the
lock is re-entrant because a finalizer that runs during a parse may parse too.

Every tree it returns is at most `MAX_DEPTH` nodes deep, so any of autod's readers of a tree, many of
them recursive (`ast.dump`, `ast.unparse`, `ast.NodeVisitor`), reads it within Python's recursion limit.
Source nested deeper (`x = a+a+...` with ten thousand terms, `- - - ... 1`, a literal nested a thousand
levels) is a SyntaxError here, as it is for any reader of autod's: it used to end a cycle as an
internal error (`RecursionError`, or the parser's `MemoryError`). Real code is far shallower: over the
20,454 modules of autod's venv and the standard library, 99.9 % are at most 41 deep and 3 deeper than
100 (sympy's generated tables and benchmarks). `ast.unparse` takes about six frames a level of a nested
literal, so 100 leaves a caller room.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["MAX_DEPTH", "parse"]

_LOCK = threading.RLock()
MAX_DEPTH = 100


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
    try:
        with _LOCK:
            tree = ast.parse(source, filename=filename)
    except (RecursionError, MemoryError):  # the parser's own limits on nesting
        raise SyntaxError("nested too deeply to read", (filename, 1, 1, None)) from None
    if _deeper_than(tree, MAX_DEPTH):
        raise SyntaxError(f"nested more than {MAX_DEPTH} levels deep: too deep to read",
                          (filename, 1, 1, None))
    return tree


def _deeper_than(tree: ast.AST, limit: int) -> bool:
    """Whether `tree` has a path of more than `limit` nodes: level by level, no recursion."""
    level: list[ast.AST] = [tree]
    for _ in range(limit):
        below: list[ast.AST] = []
        for node in level:
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, list):
                    below.extend(v for v in value if isinstance(v, ast.AST))
                elif isinstance(value, ast.AST):
                    below.append(value)
        if not below:
            return False
        level = below
    return True
