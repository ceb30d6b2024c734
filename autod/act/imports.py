"""A standard-library module an edit starts to use but never imports gets its import.

A small model rewriting a function often reaches for `re.sub` or `math.isclose` and forgets that the
file never imported the module (the whole-definition edit cannot even reach the top of the file). The
result fails with a NameError and a right idea is lost. After an edit, a name that (a) is used as
`name.attribute`, (b) is a top-level standard-library module, (c) resolves to the module scope in
every function that uses it (`symtable`: not a parameter or local anywhere it is used), (d) is bound
nowhere in the module and is no builtin, and (e) was not already used that way before the edit, gets
`import name` after the file's last top-level import (or after its docstring and `__future__`
imports). Nothing else is ever added: a third-party module could be missing from the environment, and
a wrong guess is for the checks to judge, not for autod to make.
"""

from __future__ import annotations

import ast
import builtins
import symtable
import sys

from autod import pyast
from autod.linebreaks import lines_of

__all__ = ["add_missing_imports"]

_STDLIB = frozenset(name for name in sys.stdlib_module_names if not name.startswith("_"))
_BUILTINS = frozenset(dir(builtins))


def add_missing_imports(old: str | None, new: str, filename: str = "<edit>") -> str:
    """`new` with `import X` added for each standard-library module it newly uses unimported."""
    wanted = _unimported(new, filename)
    if not wanted:
        return new
    before = _unimported(old, filename) if old else set()
    missing = sorted(wanted - before)
    if not missing:
        return new
    return _insert(new, missing)


def _unimported(text: str, filename: str) -> set[str]:
    try:
        tree = pyast.parse(text, filename=filename)
        table = symtable.symtable(text, filename, "exec")
    except (SyntaxError, ValueError):
        return set()
    bound = _module_bound(table)
    used = {
        node.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and isinstance(node.value.ctx, ast.Load)
    }
    candidates = {n for n in used if n in _STDLIB and n not in bound and n not in _BUILTINS}
    return {n for n in candidates if _global_everywhere(table, n)}


def _module_bound(table: symtable.SymbolTable) -> set[str]:
    out = set()
    for sym in table.get_symbols():
        if sym.is_imported() or sym.is_assigned() or sym.is_parameter() or sym.is_namespace():
            out.add(sym.get_name())
    return out


def _global_everywhere(table: symtable.SymbolTable, name: str) -> bool:
    """`name` is never a local, parameter or free variable of any scope that uses it."""
    for child in table.get_children():
        try:
            sym = child.lookup(name)
        except KeyError:
            sym = None
        if sym is not None and sym.is_referenced() and not sym.is_global():
            return False
        if not _global_everywhere(child, name):
            return False
    return True


def _insert(text: str, modules: list[str]) -> str:
    tree = pyast.parse(text)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = lines_of(text, keepends=True)
    after = 0  # insert after this many lines
    body = tree.body
    i = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        after = body[0].end_lineno or after  # the module docstring
        i = 1
    last_import = None
    for node in body[i:]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            last_import = node
        elif last_import is not None or not isinstance(node, ast.Expr):
            break
    if last_import is not None:
        after = last_import.end_lineno or after
    block = "".join(f"import {m}{newline}" for m in modules)
    if after == 0:
        return block + (newline if lines and lines[0].strip() else "") + text
    head = "".join(lines[:after])
    if head and not head.endswith(("\n", "\r")):
        head += newline
    return head + block + "".join(lines[after:])
