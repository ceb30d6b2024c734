"""More mutation operators, and where a bug sits, for the localization corpus (bench/corpus_seed.py).

bench/reallib_mutate.py's operators (comparison flip, off-by-one, arithmetic and boolean swaps,
swapped arguments, negated condition, True/False flip, a removed `if ...: return` branch) plus the
slips its set lacks: a wrong constant (a literal replaced by another literal of the same type that the
same file uses), a dropped statement, a dropped condition (one operand of `and`/`or` left out) and a
wrong variable (a local read where another local of the same function was meant). Kept apart from
reallib_mutate so the six libraries' committed bugs re-seed exactly as before.

`site_kind` says where a target sits, which is what localization finds hard, measured apart: a
definition too long to show whole (`long`), a class-level statement (`class_level`), a small helper
several places call (`helper`), a module-level constant (`constant`), or any other function
(`function`). Pure functions over a file's text, no I/O.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reallib_mutate as base
from reallib_mutate import Site, Target, _own_nodes, _Text, apply, targets

__all__ = ["EXTRA", "OPERATORS", "Site", "Target", "apply", "call_counts", "site_kind", "sites", "targets"]

EXTRA = ("wrong_constant", "dropped_statement", "dropped_condition", "wrong_variable")
OPERATORS = (*base.OPERATORS, *EXTRA)
LONG = 150  # lines: autod shows a longer definition in part (autod.localize.render.LONG)
HELPER_LINES = 15  # a function at most this long ...
HELPER_CALLERS = 2  # ... called from at least this many places of the library is a small helper
MAX_STR = 24  # string literals longer than this are messages and docs, not constants


def site_kind(target: Target, calls: dict[str, int]) -> str:
    """Where the target sits: long | class_level | helper | constant | function."""
    lines = target.end - target.start + 1
    if target.kind == "constant":
        return "class_level" if "." in target.qualname and _in_class(target) else "constant"
    if lines > LONG:
        return "long"
    if lines <= HELPER_LINES and calls.get(target.qualname.rsplit(".", 1)[-1], 0) >= HELPER_CALLERS:
        return "helper"
    return "function"


def _in_class(target: Target) -> bool:
    return "." in target.qualname  # reallib_mutate.targets never descends into functions for constants


def call_counts(texts: list[str]) -> dict[str, int]:
    """name -> how many call sites in the library's code call a function or method of that name."""
    out: dict[str, int] = {}
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name:
                    out[name] = out.get(name, 0) + 1
    return out


def sites(text: str, target: Target) -> dict[str, list[Site]]:
    """operator -> the sites of `target` it applies to (reallib_mutate's and the extra ones)."""
    found = base.sites(text, target)
    t = _Text(text)
    tree_lits = _literals(text)
    nodes = _own_nodes(target)
    extra: dict[str, list[Site]] = {op: [] for op in EXTRA}
    for node in nodes:
        if isinstance(node, ast.Constant) and type(node.value) in (int, str) and not _is_doc(node, target):
            a, b = t.span(node)
            src = t.get(a, b)
            if "\n" in src or (isinstance(node.value, str) and len(node.value) > MAX_STR):
                continue
            for other in tree_lits.get(type(node.value), []):
                if other != node.value:
                    new = repr(other)
                    extra["wrong_constant"].append(Site("wrong_constant", a, b, new, f"{src} -> {new}"))
                    if len(extra["wrong_constant"]) > 40:
                        break
        elif isinstance(node, ast.BoolOp) and len(node.values) >= 2:
            for i, _v in enumerate(node.values):
                keep = [x for j, x in enumerate(node.values) if j != i]
                a, b = t.span(node)
                op = " and " if isinstance(node.op, ast.And) else " or "
                new = op.join(t.get(*t.span(x)) for x in keep)
                new = f"({new})" if len(keep) > 1 else new
                note = f"operand {i} of {op.strip()} dropped"
                extra["dropped_condition"].append(Site("dropped_condition", a, b, new, note))
    if target.kind == "function":
        extra["dropped_statement"] = _dropped_statements(t, target)
        extra["wrong_variable"] = _wrong_variables(t, target)
    found.update({op: s for op, s in extra.items() if s})
    return found


def _is_doc(node: ast.Constant, target: Target) -> bool:
    body = getattr(target.node, "body", None)
    if not isinstance(body, list) or not body:
        return False
    first = body[0]
    return isinstance(first, ast.Expr) and first.value is node


def _literals(text: str) -> dict[type, list[object]]:
    """The file's short int and str literals (docstrings aside), each once, in first-use order."""
    out: dict[type, dict[object, None]] = {int: {}, str: {}}
    tree = ast.parse(text)
    docs = {id(n.body[0].value) for n in ast.walk(tree)  # type: ignore[attr-defined]
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module)
            and n.body and isinstance(n.body[0], ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docs and type(node.value) in (int, str):
            if isinstance(node.value, str) and (len(node.value) > MAX_STR or "\n" in node.value):
                continue
            out[type(node.value)][node.value] = None
    return {k: list(v)[:30] for k, v in out.items()}


def _dropped_statements(t: _Text, target: Target) -> list[Site]:
    """Simple statements on lines of their own, in a block that keeps another statement."""
    out: list[Site] = []
    fn = target.node
    for block in _blocks(fn):
        if len(block) < 2:
            continue
        for stmt in block:
            if not isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Expr):
                continue
            if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Call):
                continue  # docstrings and bare names do nothing
            a, b = t.span(stmt)
            line_start = t.starts[stmt.lineno - 1]
            end = stmt.end_lineno or stmt.lineno
            nxt = t.starts[end] if end < len(t.starts) else len(t.data)
            if t.get(line_start, a).strip() or t.get(b, nxt).strip():
                continue  # shares its line with other code
            out.append(Site("dropped_statement", line_start, nxt, "", "statement dropped"))
    return out


def _blocks(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list inside the function, nested definitions left out."""
    out: list[list[ast.stmt]] = []
    stack: list[ast.AST] = [fn]
    while stack:
        node = stack.pop()
        for key in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, key, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
            for child in block if isinstance(block, list) else ():
                if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                    stack.append(child)
    return out


def _wrong_variables(t: _Text, target: Target) -> list[Site]:
    """A local or parameter read where another one, bound before that line, was meant."""
    fn = target.node
    assert isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
    bound: dict[str, int] = {}
    a = fn.args
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]:
        bound.setdefault(arg.arg, fn.lineno)
    nodes = _own_nodes(target)
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound[node.id] = min(bound.get(node.id, node.lineno), node.lineno)
    bound.pop("self", None)
    bound.pop("cls", None)
    out: list[Site] = []
    for node in nodes:
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in bound):
            continue
        others = [n for n, line in bound.items() if n != node.id and line < node.lineno]
        for other in others[:3]:
            a0, b0 = t.span(node)
            out.append(Site("wrong_variable", a0, b0, other, f"{node.id} -> {other}"))
    return out
