"""The original docstring, kept where a small model's rewrite of a definition left it out.

A model fixing a function's body often drops its docstring (or is told it may, to spare a long one's
generation): the docstring is not what a fix changes, so a new definition without one keeps the
original's (`keep`), re-indented to where the new body stands.
"""

from __future__ import annotations

import ast

from autod.linebreaks import lines_of

__all__ = ["docstring", "keep"]

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def docstring(node: ast.AST) -> ast.stmt | None:
    """The docstring statement of a def or class, if it has one."""
    body = getattr(node, "body", None)
    if not isinstance(node, _Def) or not body:
        return None
    first = body[0]
    value = first.value if isinstance(first, ast.Expr) else None
    return first if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


def keep(old_node: ast.AST, code: str, new_node: ast.AST, old_lines: list[str]) -> str:
    """`code` (the new definition, parsed as `new_node`) with the original docstring when it has none."""
    old_doc = docstring(old_node)
    if old_doc is None or not isinstance(new_node, _Def) or docstring(new_node) is not None:
        return code
    if not new_node.body or new_node.body[0].lineno <= new_node.lineno:
        return code  # a one-line def: nowhere to put it
    lines = lines_of(code)
    at = new_node.body[0].lineno - 1
    first = lines[at]
    indent = first[: len(first) - len(first.lstrip())]
    return "\n".join([*lines[:at], *_moved(old_doc, old_lines, indent), *lines[at:]])


def _moved(old_doc: ast.stmt, old_lines: list[str], indent: str) -> list[str]:
    """The original docstring's lines, re-indented from its indentation to `indent`."""
    lines = [ln.rstrip("\r\n") for ln in old_lines[old_doc.lineno - 1 : old_doc.end_lineno]]
    old_indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    return [indent + ln[len(old_indent) :] if ln.startswith(old_indent) else ln for ln in lines]
