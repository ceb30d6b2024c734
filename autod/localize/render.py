"""Render ranked pieces for a model to copy from, filling a token budget by rank.

Code is shown exactly as in the file, without a line-number gutter, so a `search` copied from it
matches; line ranges and the reason go in the block's header line, outside the code. With the failing
tests' line coverage, a long definition is shown as the part they ran and the lines only they ran are
named under a block (autod.localize.slices).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from autod.localize import slices
from autod.localize.index import Index
from autod.localize.rank import Piece
from autod.localize.slices import Evidence
from autod.planner.fences import fence_for

LONG = 150  # a definition longer than this is shown as a window around its focus line
WINDOW = 100  # lines of a long definition shown
SKELETON_FILES = 3
SKELETON_LINES = 60  # signature lines per file, at most


def tokens(text: str) -> int:
    """The same cheap estimate every autod budget uses (4 characters a token)."""
    return len(text) // 4 + 1


@dataclass
class Rendered:
    text: str = ""
    entries: list[dict[str, str | None]] = field(default_factory=list)
    used_tokens: int = 0
    blocks: list[str] = field(default_factory=list)  # each entry's block as shown, in rank order


def block(
    piece: Piece, lines: list[str], *, long: int = LONG, window: int = WINDOW,
    evidence: Evidence | None = None, tree: ast.Module | None = None,
) -> tuple[str, tuple[int, int]]:
    """One piece as a header line and a fenced code block. A long definition is cut: to the part the
    failing tests ran when `evidence` has it (`tree`: the file's AST), else to a window around its focus.
    The lines only the failing tests ran are named under the block."""
    start, end = piece.start, min(piece.end, len(lines))
    too_long = end - start + 1 > long
    shown: list[int] = []
    if too_long and evidence is not None and piece.kind == "function":
        ran = evidence.failing_ran(piece.path, start, end)
        shown = slices.executed_slice(lines, tree, start, piece.header_end or start, end, ran, piece.focus)
    if shown:
        body = slices.render_slice(lines, shown, end)
        where = f"{len(shown)} of lines {start}-{end}: the signature and what the failing tests ran"
    else:
        lo, hi = start, end
        if too_long:
            centre = piece.focus if piece.focus and start <= piece.focus <= end else start + window // 2
            lo = max(start, centre - window // 2)
            hi = min(end, lo + window - 1)
        where = f"lines {lo}-{hi}" + (f" (part of {start}-{end})" if too_long else "")
        shown = list(range(lo, hi + 1))
        body = "\n".join(lines[lo - 1 : hi])
    lo, hi = shown[0], shown[-1]
    focus = f"; line {piece.focus} is the one named" if piece.focus and piece.focus in shown else ""
    # the symbol right after the path: what a whole-definition edit names (`path` + `symbol`)
    name = f" · {piece.symbol}" if piece.symbol else ""
    header = f"### {piece.path}{name} ({where}; {piece.why}{focus})"
    fence = fence_for(body)  # longer than any fence a docstring in it holds
    marked = slices.marks(evidence, piece.path, lines, shown) if piece.kind == "function" else ""
    tail = f"\n{marked}" if marked else ""
    return f"{header}\n{fence}python\n{body}\n{fence}{tail}", (lo, hi)


def fill(
    pieces: list[Piece],
    read_lines: Callable[[str], list[str] | None],
    budget_tokens: int,
    evidence: Evidence | None = None,
) -> Rendered:
    """Render pieces in rank order while they fit; one too big is skipped, not cut."""
    out = Rendered()
    left = budget_tokens
    cache: dict[str, list[str] | None] = {}
    trees: dict[str, ast.Module | None] = {}
    for piece in pieces:
        if piece.path not in cache:
            cache[piece.path] = read_lines(piece.path)
        lines = cache[piece.path]
        if not lines:
            continue
        tree = None
        if evidence is not None and piece.end - piece.start + 1 > LONG:
            if piece.path not in trees:
                trees[piece.path] = slices.parse_lines(lines)
            tree = trees[piece.path]
        text, (lo, hi) = block(piece, lines, evidence=evidence, tree=tree)
        long_one = min(piece.end, len(lines)) - piece.start + 1 > LONG  # shown in part, whatever its ends
        cost = tokens(text) + 1
        if cost > left:
            continue
        out.blocks.append(text)
        left -= cost
        entry = piece.entry()
        entry["lines"] = f"{lo}-{hi}"
        whole = (lo, hi) == (piece.start, min(piece.end, len(lines))) and not long_one
        if piece.symbol and not whole:
            entry["part_of"] = f"{piece.start}-{piece.end}"  # a window or a slice: never rewritten whole
        out.entries.append(entry)
        if left < 40:
            break
    out.text = "\n\n".join(out.blocks)
    out.used_tokens = budget_tokens - left
    return out


def skeleton(
    index: Index,
    paths: list[str],
    shown: set[tuple[str, str]],
    read_lines: Callable[[str], list[str] | None],
    budget_tokens: int,
) -> Rendered:
    """Signatures and first docstring lines of the top files' other definitions: a map to ask from."""
    out = Rendered()
    parts: list[str] = []
    left = budget_tokens
    for path in paths[:SKELETON_FILES]:
        mod = index.modules.get(path)
        lines = read_lines(path) if mod is not None else None
        if mod is None or not lines:
            continue
        rows = []
        for d in sorted(mod.defs.values(), key=lambda d: d.start):
            if (path, d.qualname) in shown or d.kind not in ("function", "class"):
                continue
            sig = [x.strip() for x in lines[d.start - 1 : d.header_end] if not x.lstrip().startswith("@")]
            head = " ".join(sig)[:160]
            doc = f"  # {d.doc[:100]}" if d.doc else ""
            rows.append(f"{'    ' * d.qualname.count('.')}{head}  [{d.start}-{d.end}]{doc}")
            if len(rows) >= SKELETON_LINES:
                rows.append("    ...")
                break
        if not rows:
            continue
        text = f"### {path} outline (signatures only; ask for a body by name in `need`)\n" + "\n".join(rows)
        cost = tokens(text) + 1
        if cost > left:
            continue
        parts.append(text)
        left -= cost
        out.entries.append({"path": path, "symbol": None, "lines": "outline", "why": "outline of a top file"})
    out.text = "\n\n".join(parts)
    out.used_tokens = budget_tokens - left
    return out
