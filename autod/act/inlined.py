"""A fix that writes a literal where the code used a named constant is a symptom patch.

A small model that sees `return feet * INCHES_PER_FOOT` return 20 where the test wants 24 often
writes `return feet * 12`: the test passes, the constant keeps its wrong value and every other user
of it stays broken. When a candidate's function stops using a module-level constant of the workspace
(defined in the module or imported from a workspace module, bound to a plain literal) and gains a
literal in its place, the candidate is refused with a reason that names where the constant is
defined, so the next plan can fix it there. Pure: file texts in, findings out.
"""

from __future__ import annotations

import ast
import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from autod import pyast

_Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Inlined:
    name: str  # the constant no longer used
    function: str  # the qualname of the function that dropped it
    defined_in: str  # the workspace file that defines it (relative path)

    def reason(self) -> str:
        return (f"{self.function} now writes a literal where it used the constant {self.name}: if "
                f"{self.name}'s value is wrong, change it where it is defined ({self.defined_in} · "
                f"{self.name}), so every user of it is fixed, not only the one the test calls")


def _literal(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value is not None


def _constants(tree: ast.Module) -> set[str]:
    """Module-level names bound once, to a plain literal (numbers and strings)."""
    bound: Counter[str] = Counter()
    literal: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.AST | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name):
                bound[t.id] += 1
                if _literal(value):
                    literal.add(t.id)
    return {n for n in literal if bound[n] == 1}


def functions(tree: ast.Module) -> dict[str, _Func]:
    out: dict[str, _Func] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, _Func):
                out[prefix + node.name] = node
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return out


def _names(fn: _Func) -> Counter[str]:
    return Counter(n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _literals(fn: _Func) -> Counter[str]:
    return Counter(ast.unparse(n) for n in ast.walk(fn) if _literal(n))


def workspace_imports(rel: str, tree: ast.Module, read: Callable[[str], str | None]
                      ) -> Iterator[tuple[ast.ImportFrom, str, ast.Module]]:
    """(the import, the workspace file it names, that file parsed) for each `from X import ...` of
    the module at `rel` whose X is a workspace module (`from units import X`, `from .units import
    X`, or under `src/`). `read(rel)` gives a workspace file's text, or None."""
    here = rel.rsplit("/", 1)[0] if "/" in rel else ""
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        path = node.module.replace(".", "/") + ".py"
        tries = [f"{here}/{path}" if here else path] if node.level else [path, f"src/{path}"]
        if not node.level and here:
            tries.append(f"{here}/{path}")
        for cand in tries:
            text = read(cand)
            if text is None:
                continue
            with contextlib.suppress(SyntaxError, ValueError):
                yield node, cand, pyast.parse(text)
            break


def _visible_constants(rel: str, tree: ast.Module, read: Callable[[str], str | None]) -> dict[str, str]:
    """Constant name -> the workspace file that defines it: this module's, and those it imports by
    name (`from units import X`, `from .units import X`) from a workspace module."""
    out = {name: rel for name in _constants(tree)}
    for node, cand, module in workspace_imports(rel, tree, read):
        names = _constants(module)
        for alias in node.names:
            if alias.name in names:
                out[alias.asname or alias.name] = cand
    return out


def inlined_constants(rel: str, old: str, new: str, read: Callable[[str], str | None]) -> list[Inlined]:
    """Functions of `rel` that used a workspace constant in `old` and, in `new`, use it less and hold
    a literal they did not hold. `read(rel)` gives another workspace file's text (or None)."""
    if not rel.endswith(".py"):
        return []
    try:
        before, after = pyast.parse(old), pyast.parse(new)
    except (SyntaxError, ValueError):
        return []
    constants = _visible_constants(rel, before, read)
    if not constants:
        return []
    found: list[Inlined] = []
    new_funcs = functions(after)
    for qualname, fn in functions(before).items():
        other = new_funcs.get(qualname)
        if other is None:
            continue
        used, uses = _names(fn), _names(other)
        gained = _literals(other) - _literals(fn)
        if not gained:
            continue
        for name, where in constants.items():
            if uses[name] < used[name] and name not in _shadowed(fn) | _shadowed(other):
                found.append(Inlined(name, qualname, where))
    return found


def _shadowed(fn: _Func) -> set[str]:
    """Names the function binds itself (then a dropped use is not the module's constant)."""
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
