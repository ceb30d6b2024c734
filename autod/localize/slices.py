"""Line-level evidence in the shown code: a long definition as the part the failing tests ran, and the
lines only they ran named under a block.

A definition longer than autod shows whole (render.LONG) used to be a fixed window around the line a
frame named, or around its top when no frame did: a slip 200 lines into a long parser was never shown.
With the failing tests' line coverage (autod.localize.spectrum.Spectrum) the slice is what they ran,
most suspicious lines first, each with the statement that holds it and the block headers above it
(`if`, `for`, `else:`, `except`), under the definition's signature, with a comment line where lines
were left out. Nothing here changes the text of a line shown: a plan copies from it.

Pure functions over a file's lines and its AST; the spectrum is read through `Evidence`.
"""

from __future__ import annotations

import ast
from typing import Protocol

from autod import pyast

SLICE_LINES = 80  # lines of a long definition shown, at most (signature and block headers included)
SIGNATURE_LINES = 12  # of a long signature, at most
FILLED_GAP = 2  # a gap this short is shown rather than replaced by a comment line
MAX_MARKS = 5  # lines named under a block as run only by the failing tests
_CLAUSES = ("else", "finally", "try")


class Evidence(Protocol):
    """What the failing tests' line coverage says about a span of a file (Spectrum has it)."""

    def failing_ran(self, path: str, start: int, end: int) -> dict[int, float]: ...

    def failing_only(self, path: str, start: int, end: int) -> list[int]: ...


def parse_lines(lines: list[str]) -> ast.Module | None:
    try:
        return pyast.parse("\n".join(lines) + "\n")
    except (SyntaxError, ValueError):
        return None


class _Shape:
    """Statement spans of one definition: what to show for a line, and the headers above it."""

    def __init__(self, tree: ast.Module, start: int, end: int, lines: list[str]) -> None:
        self.lines = lines
        self.head: dict[int, tuple[int, int]] = {}  # line -> (first, last) shown for it
        self.parent: dict[int, int] = {}  # a statement's first line -> its enclosing block's first line
        self.clause: dict[int, int] = {}  # a block's first statement line -> its `else:`/`finally:` line
        for node in ast.walk(tree):
            if not isinstance(node, ast.stmt | ast.excepthandler):
                continue
            if node.lineno < start or (node.end_lineno or node.lineno) > end:
                continue
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            kids = [b for key in ("body", "orelse", "finalbody", "handlers")
                    for b in [getattr(node, key, None)] if isinstance(b, list) and b]
            # a compound statement: its header, up to where its body starts
            last = max(node.lineno, _first(kids[0][0]) - 1) if kids else node.end_lineno or node.lineno
            for ln in range(first, last + 1):
                self.head.setdefault(ln, (first, last))
            for key in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(node, key, None)
                if not isinstance(block, list):
                    continue
                for child in block:
                    if isinstance(child, ast.stmt | ast.excepthandler):
                        self.parent[_first(child)] = first
                if key in ("orelse", "finalbody") and block:
                    self._clause_line(_first(block[0]))

    def _clause_line(self, first: int) -> None:
        ln = first - 1
        while ln > 0 and not self.lines[ln - 1].strip():
            ln -= 1
        if ln > 0 and self.lines[ln - 1].strip().startswith(_CLAUSES):
            self.clause[first] = ln

    def span(self, line: int) -> set[int]:
        """The line's statement (or header) and every block header above it."""
        first, last = self.head.get(line, (line, line))
        out = set(range(first, last + 1))
        at = first
        for _ in range(50):
            if at in self.clause:
                out.add(self.clause[at])
            up = self.parent.get(at)
            if up is None:
                break
            a, b = self.head.get(up, (up, up))
            out |= set(range(a, b + 1))
            at = up
        return out


def _first(node: ast.AST) -> int:
    decos = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decos)])  # type: ignore[attr-defined]


def executed_slice(
    lines: list[str], tree: ast.Module | None, start: int, header_end: int, end: int,
    ran: dict[int, float], focus: int | None = None, budget: int = SLICE_LINES,
) -> list[int]:
    """The lines of a long definition to show: its signature, then the line a frame named and the lines
    the failing tests ran, most suspicious first (file order among equals), each with its statement
    and the headers above it, while they fit `budget` lines. Empty when the tests ran none of it."""
    if not ran or tree is None:
        return []
    shape = _Shape(tree, start, end, lines)
    shown = set(range(start, min(header_end, start + SIGNATURE_LINES - 1) + 1))
    order = sorted(ran, key=lambda ln: (-ran[ln], ln))
    if focus is not None and start <= focus <= end:
        order = [focus, *(ln for ln in order if ln != focus)]
    for ln in order:
        new = {x for x in shape.span(ln) if start <= x <= end} - shown
        if len(shown) + len(new) <= budget:
            shown |= new
    return sorted(shown)


def render_slice(lines: list[str], shown: list[int], end: int) -> str:
    """The shown lines as the file has them, and a comment line, indented like the code it stands for,
    where more than FILLED_GAP lines were left out."""
    out: list[str] = []
    prev: int | None = None
    for ln in shown:
        if prev is not None and ln > prev + 1:
            if ln - prev - 1 <= FILLED_GAP:
                out += lines[prev : ln - 1]
            else:
                out.append(_elided(lines, prev + 1, ln - 1))
        out.append(lines[ln - 1])
        prev = ln
    if prev is not None and prev < end:
        out.append(_elided(lines, prev + 1, end))
    return "\n".join(out)


def _elided(lines: list[str], a: int, b: int) -> str:
    like = next((lines[i - 1] for i in range(a, b + 1) if lines[i - 1].strip()), "")
    indent = like[: len(like) - len(like.lstrip())]
    what = f"line {a}" if a == b else f"lines {a}-{b}"
    return f"{indent}# ... {what} not shown"


def marks(evidence: Evidence | None, path: str, lines: list[str], shown: list[int]) -> str:
    """The shown lines only the failing tests ran (number and text, MAX_MARKS at most), for under a
    block; "" when there are none, or when the failing tests alone ran every line shown (the block's
    reason already says so, and no line stands out)."""
    if evidence is None or not shown:
        return ""
    seen = set(shown)
    ran = [ln for ln in evidence.failing_ran(path, shown[0], shown[-1]) if ln in seen]
    only = [ln for ln in evidence.failing_only(path, shown[0], shown[-1])
            if ln in seen and ln <= len(lines) and lines[ln - 1].strip()]
    if not only or len(only) == len(ran):
        return ""
    rows = [f"  {ln}: {lines[ln - 1].strip()}" for ln in only[:MAX_MARKS]]
    if len(only) > MAX_MARKS:
        rows.append(f"  (and {len(only) - MAX_MARKS} more)")
    return "Only the failing tests ran these lines of it:\n" + "\n".join(rows)
