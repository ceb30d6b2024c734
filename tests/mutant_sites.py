"""The mutants of one module: every small change to its functions' code, found in its AST.

A `Site` is one mutant: the function that holds it, its line, the code before and after, and how to
make and undo the change in the parsed tree (a forked process makes it, compiles the module and
swaps the function's code; tests/mutants.py runs them).

The changes (strings are never changed: most are messages, and a rule's own words are pinned by
tests that read them): comparisons to their edge or their negation (`<` `<=`, `==` `!=`, `in`
`not in`, `is` `is not`), `and`/`or`, a `not` dropped, an `if` on a bare value negated, one flag
dropped from an `a | b | c` chain, `+`/`-`, `*`/`//`, an augmented `+=`/`-=`, a number plus one,
`True`/`False`, `break`/`continue`, a returned value replaced by `None` (unless it is a falsy
literal: a caller that tests it reads None the same). Log calls, f-strings (messages) and default
arguments (the function object holds them, not its code) are left alone.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG_METHODS = frozenset({"debug", "info", "warning", "error", "exception", "critical", "msg"})


@dataclass
class Site:
    """One mutant: where it is, what it changes, and how to make (and undo) the change in the AST."""

    module: str
    function: str  # qualname of the top-level function or method that holds it
    line: int
    original: str
    mutated: str
    apply: Callable[[], None]
    revert: Callable[[], None]
    key: str = ""  # "module::function: original -> mutated" (with "#n" when repeated in the function)


_COMPARE = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
_BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult}


class _Finder:
    """Walks one module's functions in a fixed order and lists every mutation site."""

    def __init__(self, module: str, source: str, skip: Collection[str]) -> None:
        self.module, self.source, self.skip = module, source, skip
        self.sites: list[Site] = []
        self._function = ""

    def run(self, tree: ast.Module) -> list[Site]:
        self._body(tree.body, prefix="")
        seen: dict[str, int] = {}
        for s in self.sites:
            base = f"{s.module}::{s.function}: {s.original} -> {s.mutated}"
            seen[base] = seen.get(base, 0) + 1
            s.key = base if seen[base] == 1 else f"{base} #{seen[base]}"
        return self.sites

    def _body(self, body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                self._body(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self._function = prefix + node.name
                if self._function in self.skip:
                    continue
                for stmt in node.body:
                    self._visit(stmt)

    def _add(self, node: ast.AST, apply: Callable[[], None], revert: Callable[[], None],
             shown: ast.AST | None = None, mutated: str | None = None, original: str | None = None) -> None:
        shown = shown or node
        original = original or ast.get_source_segment(self.source, shown) or ast.unparse(shown)
        if mutated is None:
            apply()
            mutated = ast.unparse(shown)
            revert()
        self.sites.append(Site(self.module, self._function, getattr(node, "lineno", 0),
                               " ".join(original.split()), " ".join(mutated.split()), apply, revert))

    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.JoinedStr | ast.arguments | ast.ClassDef) or _is_log_call(node):
            return  # messages, defaults (held by the function object, not its code), log lines
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for stmt in node.body if isinstance(node.body, list) else [node.body]:
                self._visit(stmt)
            return
        self._sites_of(node)
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "decorator_list"):
                continue
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        self._child_sites(node, field, i, child)
                        self._visit(child)
            elif isinstance(value, ast.AST):
                self._child_sites(node, field, None, value)
                self._visit(value)

    def _sites_of(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _COMPARE:
                    self._swap(node, node.ops, i, _COMPARE[type(op)]())
        elif isinstance(node, ast.BoolOp):
            self._set(node, "op", ast.Or() if isinstance(node.op, ast.And) else ast.And())
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
            self._set(node, "op", _BINOP[type(node.op)]())
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            self._drop_flags(node)
        elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
            self._set(node, "op", _BINOP[type(node.op)]())
        elif isinstance(node, ast.Break | ast.Continue):
            pass  # replaced in the parent's list (_child_sites)
        elif isinstance(node, ast.Return) and node.value is not None and not _is_falsy_literal(node.value):
            self._set(node, "value", ast.Constant(None))
        elif isinstance(node, ast.If | ast.IfExp | ast.While) and isinstance(
            node.test, ast.Name | ast.Attribute | ast.Call | ast.Subscript
        ):
            test = node.test
            negated = ast.copy_location(ast.UnaryOp(ast.Not(), test), test)
            self._add(test, lambda: setattr(node, "test", negated), lambda: setattr(node, "test", test),
                      mutated=f"not {ast.unparse(test)}")

    def _child_sites(self, parent: ast.AST, field: str, index: int | None, child: ast.AST) -> None:
        """Mutants that replace `child` in its parent: `not x` -> `x`, `break` <-> `continue`, a
        number plus one, `True` <-> `False` (shown with its keyword: `parents=True`)."""
        if isinstance(child, ast.Constant) and type(child.value) in (int, float, bool):
            value = child.value
            new_value = (not value) if isinstance(value, bool) else value + 1
            segment = ast.get_source_segment(self.source, child) or repr(value)
            shown = oct(new_value) if segment.startswith("0o") else repr(new_value)
            if isinstance(parent, ast.keyword) and parent.arg:
                segment, shown = f"{parent.arg}={segment}", f"{parent.arg}={shown}"
            self._add(child, lambda: setattr(child, "value", new_value),
                      lambda: setattr(child, "value", value), mutated=shown, original=segment)
            return
        new: ast.AST | None = None
        if isinstance(child, ast.UnaryOp) and isinstance(child.op, ast.Not):
            new = child.operand
        elif isinstance(child, ast.Break):
            new = ast.Continue()
        elif isinstance(child, ast.Continue):
            new = ast.Break()
        if new is None:
            return
        replacement = ast.copy_location(new, child)

        def put(value: ast.AST) -> None:
            if index is None:
                setattr(parent, field, value)
            else:
                getattr(parent, field)[index] = value

        self._add(child, lambda: put(replacement), lambda: put(child), shown=child,
                  mutated=ast.unparse(replacement))

    def _swap(self, node: ast.AST, ops: list[ast.cmpop], i: int, new: ast.cmpop) -> None:
        old = ops[i]

        def apply() -> None:
            ops[i] = new

        def revert() -> None:
            ops[i] = old

        self._add(node, apply, revert)

    def _set(self, node: ast.AST, attr: str, value: Any, mutated: str | None = None) -> None:
        old = getattr(node, attr)
        if isinstance(value, ast.AST) and hasattr(old, "lineno"):
            ast.copy_location(value, old)
        self._add(node, lambda: setattr(node, attr, value), lambda: setattr(node, attr, old),
                  mutated=mutated)

    def _drop_flags(self, node: ast.BinOp) -> None:
        """`a | b | c` -> each of `b | c`, `a | c`, `a | b` (a flag forgotten); only at the chain's top."""
        operands = _or_chain(node)
        if len(operands) < 2 or getattr(node, "_in_chain", False):
            return
        for sub in _or_nodes(node):
            sub._in_chain = True  # type: ignore[attr-defined]
        for k in range(len(operands)):
            rest = operands[:k] + operands[k + 1 :]
            new = rest[0]
            for r in rest[1:]:
                new = ast.copy_location(ast.BinOp(new, ast.BitOr(), r), node)
            self._replace_whole(node, ast.copy_location(new, node))

    def _replace_whole(self, node: ast.BinOp, new: ast.expr) -> None:
        saved = (node.left, node.op, node.right)
        if isinstance(new, ast.BinOp):
            target = (new.left, new.op, new.right)
        else:  # one operand left: `x | 0` keeps the node a BinOp with the same value
            target = (new, ast.BitOr(), ast.copy_location(ast.Constant(0), new))

        def apply() -> None:
            node.left, node.op, node.right = target

        def revert() -> None:
            node.left, node.op, node.right = saved

        self._add(node, apply, revert, mutated=ast.unparse(new))


def _or_chain(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _or_chain(node.left) + _or_chain(node.right)
    return [node]


def _or_nodes(node: ast.expr) -> Iterator[ast.BinOp]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        yield node
        yield from _or_nodes(node.left)
        yield from _or_nodes(node.right)


def _is_falsy_literal(node: ast.expr) -> bool:
    """`None`, `False`, `0`, `""`, `[]`, `()`, `{}`: a caller that tests the value reads None the same."""
    if isinstance(node, ast.Constant):
        return not node.value
    return isinstance(node, ast.List | ast.Tuple | ast.Dict | ast.Set) and not (
        getattr(node, "elts", None) or getattr(node, "keys", None)
    )


def _is_log_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr in LOG_METHODS
        and isinstance(node.value.func.value, ast.Name)
        and node.value.func.value.id in ("log", "logger")
    )


def sites(root: Path, module: str, skip: Collection[str] = ()) -> tuple[ast.Module, list[Site]]:
    """The module's tree and every mutant of it (in a fixed order), but in the functions `skip` names."""
    source = (root / module).read_text(encoding="utf-8")
    tree = ast.parse(source)
    return tree, _Finder(module, source, skip).run(tree)


