"""Mutation operators for bench_reallib: one small, realistic slip at one site of a library's code.

Pure functions over a file's text, no I/O. `targets(text)` lists what may be mutated (every function
or method, innermost, and every module- or class-level constant assignment); `sites(target)` lists,
per operator, the places in it an operator applies to; `apply(text, site)` returns the mutated text,
changed at that byte range only (the rest of the file is byte-identical), or None when the result
does not parse or does not change the code. Nothing here knows which library or bug it serves: the
seeder picks targets, operators and sites with a seeded RNG.

Operators: comparison flip, off-by-one on an integer constant (slice bounds included) or on a name
used as a slice bound, arithmetic/bitwise operator swap, augmented-assignment swap, and/or swap,
swapped call arguments, negated condition, True/False flip (defaults included), a removed `if ...:
return/raise` branch.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

CMP = {
    ast.Lt: ("<", ["<=", ">"]),
    ast.LtE: ("<=", ["<", ">="]),
    ast.Gt: (">", [">=", "<"]),
    ast.GtE: (">=", [">", "<="]),
    ast.Eq: ("==", ["!="]),
    ast.NotEq: ("!=", ["=="]),
    ast.In: ("in", ["not in"]),
    ast.NotIn: ("not in", ["in"]),
    ast.Is: ("is", ["is not"]),
    ast.IsNot: ("is not", ["is"]),
}
ARITH = {
    ast.Add: ("+", ["-"]),
    ast.Sub: ("-", ["+"]),
    ast.Mult: ("*", ["/", "+"]),
    ast.Div: ("/", ["*", "//"]),
    ast.FloorDiv: ("//", ["/", "*"]),
    ast.Mod: ("%", ["//"]),
    ast.BitOr: ("|", ["&"]),
    ast.BitAnd: ("&", ["|"]),
    ast.LShift: ("<<", [">>"]),
    ast.RShift: (">>", ["<<"]),
}
BOOL = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
OPERATORS = (
    "comparison_flip", "off_by_one", "slice_bound", "arithmetic_swap", "augassign_swap", "boolean_swap",
    "swapped_args", "negated_condition", "bool_constant", "removed_return_branch",
)


@dataclass(frozen=True)
class Target:
    """A definition a bug may be seeded in: a function (innermost) or a constant's statement."""

    qualname: str
    kind: str  # function | constant
    start: int  # first line (decorators included)
    end: int
    node: ast.AST


@dataclass(frozen=True)
class Site:
    """One mutation: replace bytes [start, end) of the file with `new`."""

    operator: str
    start: int
    end: int
    new: str
    note: str


def targets(text: str) -> list[Target]:
    tree = ast.parse(text)
    out: list[Target] = []

    def walk(body: list[ast.stmt], prefix: str, in_func: bool) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                q = prefix + node.name
                deco = [d.lineno for d in node.decorator_list]
                out.append(Target(q, "function", min([node.lineno, *deco]), node.end_lineno or 0, node))
                walk(node.body, q + ".", True)
            elif isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".", in_func)
            elif not in_func and isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                names = node.targets if isinstance(node, ast.Assign) else [node.target]
                first = next((t.id for t in names if isinstance(t, ast.Name)), None)
                if first and not first.startswith("__"):
                    out.append(Target(prefix + first, "constant", node.lineno, node.end_lineno or 0, node))
            elif not in_func and isinstance(node, ast.If | ast.Try):
                for key in ("body", "orelse", "finalbody"):
                    walk(getattr(node, key, []), prefix, in_func)

    walk(tree.body, "", False)
    return out


def _own_nodes(target: Target) -> list[ast.AST]:
    """The target's nodes, without nested definitions (a nested function is a target of its own)."""
    out: list[ast.AST] = []
    root = target.node
    body = list(getattr(root, "body", [])) if target.kind == "function" else [root]
    if target.kind == "function":
        body = body[1:] if _is_docstring(body[0]) else body
        args = root.args  # type: ignore[attr-defined]
        stack: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d is not None), *body]
    else:
        stack = [root.value]  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.JoinedStr):
            continue  # f-strings: positions inside them are unreliable across Python versions
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _is_docstring(node: ast.stmt) -> bool:
    value = getattr(node, "value", None)
    return isinstance(node, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str)


class _Text:
    """Byte offsets of (line, column) positions: ast columns count UTF-8 bytes."""

    def __init__(self, text: str) -> None:
        self.data = text.encode("utf-8")
        self.starts = [0]
        for m in re.finditer(b"\n", self.data):
            self.starts.append(m.end())

    def pos(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.pos(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.pos(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def get(self, a: int, b: int) -> str:
        return self.data[a:b].decode("utf-8")


def _gap_op(t: _Text, a: int, b: int, op: str) -> tuple[int, int] | None:
    """Where the operator token `op` stands in the text between two operands."""
    gap = t.get(a, b)
    if op[0].isalpha():
        pat = r"\b" + r"\s+".join(map(re.escape, op.split())) + r"\b"
    else:
        pat = r"(?<![<>=!*/%&|+-])" + re.escape(op) + r"(?![<>=*/])"
    m = re.search(pat, gap)
    if m is None:
        return None
    prefix = len(gap[: m.start()].encode())
    return a + prefix, a + prefix + len(m.group().encode())


def sites(text: str, target: Target) -> dict[str, list[Site]]:
    """operator -> the sites of `target` it applies to."""
    t = _Text(text)
    found: dict[str, list[Site]] = {op: [] for op in OPERATORS}
    nodes = _own_nodes(target)
    for node in nodes:
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in CMP:
            old, news = CMP[type(node.ops[0])]
            where = _gap_op(t, t.span(node.left)[1], t.span(node.comparators[0])[0], old)
            for new in news if where else ():
                found["comparison_flip"].append(Site("comparison_flip", *where, new, f"{old} -> {new}"))
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITH:
            old, news = ARITH[type(node.op)]
            if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant | ast.JoinedStr):
                continue  # string formatting, not arithmetic
            where = _gap_op(t, t.span(node.left)[1], t.span(node.right)[0], old)
            for new in news if where else ():
                found["arithmetic_swap"].append(Site("arithmetic_swap", *where, new, f"{old} -> {new}"))
        elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
            old, new = ("+=", "-=") if isinstance(node.op, ast.Add) else ("-=", "+=")
            where = _gap_op(t, t.span(node.target)[1], t.span(node.value)[0], old)
            if where:
                found["augassign_swap"].append(Site("augassign_swap", *where, new, f"{old} -> {new}"))
        elif isinstance(node, ast.BoolOp) and type(node.op) in BOOL:
            old, new = BOOL[type(node.op)]
            where = _gap_op(t, t.span(node.values[0])[1], t.span(node.values[1])[0], old)
            if where:
                found["boolean_swap"].append(Site("boolean_swap", *where, new, f"{old} -> {new}"))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            a, b = t.span(node)
            if t.get(a, b).isdigit():
                for new in (node.value + 1, node.value - 1) if node.value > 0 else (1,):
                    found["off_by_one"].append(Site("off_by_one", a, b, str(new), f"{node.value} -> {new}"))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            a, b = t.span(node)
            new = str(not node.value)
            found["bool_constant"].append(Site("bool_constant", a, b, new, f"{node.value} -> {new}"))
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if isinstance(bound, ast.Name | ast.Attribute | ast.Call):
                    a, b = t.span(bound)
                    for d in ("+ 1", "- 1"):
                        new = f"{t.get(a, b)} {d}"
                        found["slice_bound"].append(Site("slice_bound", a, b, new, f"slice bound {d}"))
        elif isinstance(node, ast.Call):
            args = [x for x in node.args if not isinstance(x, ast.Starred)]
            if len(args) == len(node.args) and len(args) >= 2:
                for i in range(len(args) - 1):
                    x, y = t.span(args[i]), t.span(args[i + 1])
                    if t.get(*x) == t.get(*y):
                        continue
                    new = f"{t.get(*y)}{t.get(x[1], y[0])}{t.get(*x)}"
                    note = f"args {i},{i + 1} swapped"
                    found["swapped_args"].append(Site("swapped_args", x[0], y[1], new, note))
        if isinstance(node, ast.If | ast.While | ast.IfExp):
            a, b = t.span(node.test)
            seg = t.get(a, b)
            if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not):
                new = t.get(*t.span(node.test.operand))
            elif isinstance(node.test, ast.Name | ast.Attribute | ast.Call):
                new = f"not {seg}"
            else:
                new = f"not ({seg})"
            found["negated_condition"].append(Site("negated_condition", a, b, new, "condition negated"))
        if isinstance(node, ast.If) and not node.orelse and isinstance(node.body[-1], ast.Return | ast.Raise):
            a, b = t.span(node)
            line_start = t.starts[node.lineno - 1]
            nxt = t.starts[node.end_lineno] if node.end_lineno < len(t.starts) else len(t.data)  # type: ignore[operator]
            if not t.get(line_start, a).strip() and not t.get(b, nxt).strip():
                found["removed_return_branch"].append(
                    Site("removed_return_branch", line_start, nxt, "", "if-branch that returns removed")
                )
    return {op: s for op, s in found.items() if s}


def apply(text: str, site: Site) -> str | None:
    """The mutated text, or None when it does not parse or compiles to the same code."""
    data = text.encode("utf-8")
    new = (data[: site.start] + site.new.encode("utf-8") + data[site.end :]).decode("utf-8")
    try:
        tree = ast.parse(new)
    except SyntaxError:
        return None
    if ast.dump(tree) == ast.dump(ast.parse(text)):
        return None
    if site.operator == "removed_return_branch" and _empty_body(tree):
        return None
    return new


def _empty_body(tree: ast.AST) -> bool:
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and all(_is_docstring(s) for s in n.body)
        for n in ast.walk(tree)
    )


def changed_lines(old: str, new: str) -> tuple[int, list[str], list[str]]:
    """(first changed line, the old lines there, the new lines there): how the bug is stored."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    j = 0
    while j < min(len(a), len(b)) - i and a[-1 - j] == b[-1 - j]:
        j += 1
    return i + 1, a[i : len(a) - j], b[i : len(b) - j]
