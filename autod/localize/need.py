"""Answer a plan's `need`: the definitions a model asked for by name, from the index, under the read rules.

A name is `path::Qual.name`, `Qual.name` or `name` (or a bare `path.py` for that file's outline).
Unknown, unreadable and denied names get the same answer ("not found"), so asking reveals nothing
about files a prompt may not show.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autod.linebreaks import lines_of
from autod.localize import render
from autod.localize.frames import is_test_path
from autod.localize.index import Definition, Index, build_index
from autod.localize.rank import Piece

if TYPE_CHECKING:
    from autod.config.settings import Settings
    from autod.safety.boundary import Boundary

_QUAL = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){0,5}")
PER_NAME = 2  # definitions shown for one ambiguous name, at most
LONG = 200  # lines of one answered definition shown, at most


@dataclass
class Answer:
    text: str = ""
    entries: list[dict[str, str | None]] = field(default_factory=list)


def lookup(index: Index, name: str) -> list[Definition] | str | None:
    """The definitions a name means (best first), a path's outline marker, or None."""
    name = name.strip().strip("`'\"")
    path, sep, qual = name.partition("::")
    if not sep:
        if name.endswith(".py"):
            return name if name in index.modules else None
        path, qual = "", name
    qual = qual.replace("::", ".").strip().removesuffix("()")
    if not _QUAL.fullmatch(qual):
        return None
    if path:
        mod = index.modules.get(path.removeprefix("./"))
        if mod is None:
            return None
        exact = mod.defs.get(qual)
        if exact is not None:
            return [exact]
        return [d for q, d in mod.defs.items() if q.endswith("." + qual)][:PER_NAME] or None
    found = [d for d in index.find(qual) if d.qualname == qual] or index.find(qual)
    found.sort(key=lambda d: (is_test_path(d.path), d.path.count("/"), d.path))
    return found[:PER_NAME] or None


async def answer_need(
    settings: Settings, boundary: Boundary, names: list[str], budget_tokens: int
) -> Answer:
    """Render what `names` ask for (the first localize.need_max of them) within the budget."""
    cfg = settings.localize
    names = [n for n in names if isinstance(n, str) and n.strip()][: cfg.need_max]
    if not names:
        return Answer()
    index = await asyncio.to_thread(
        build_index,
        boundary,
        max_files=cfg.index_max_files,
        max_bytes=cfg.index_max_mb * 2**20,
        max_summary=cfg.index_max_summary_mb * 2**20,
        timeout_s=cfg.index_timeout_s,
    )
    return await asyncio.to_thread(_render, index, boundary, names, budget_tokens)


def _render(index: Index, boundary: Boundary, names: list[str], budget_tokens: int) -> Answer:
    out = Answer()
    parts: list[str] = []
    left = budget_tokens
    shown: set[tuple[str, str]] = set()

    def read_lines(rel: str) -> list[str] | None:
        body = boundary.read_text(rel)
        return lines_of(body) if body is not None else None

    for name in names:
        found = lookup(index, name)
        shown_name = name.strip()[:120]
        if found is None:
            parts.append(f"### {shown_name}: not found")
            continue
        if isinstance(found, str):
            outline = render.skeleton(index, [found], set(), read_lines, left)
            parts.append(outline.text or f"### {shown_name}: not found")
            left -= outline.used_tokens
            out.entries += [{**e, "why": "asked for by the plan"} for e in outline.entries]
            continue
        for d in found:
            if (d.path, d.qualname) in shown:
                continue
            lines = read_lines(d.path)
            if not lines:
                continue
            end = d.end if d.kind != "class" else max(d.header_end, min(d.end, d.start + LONG - 1))
            piece = Piece(d.path, d.start, end, "asked for by the plan", 0, d.qualname)
            text, (lo, hi) = render.block(piece, lines, long=LONG, window=LONG)
            cost = render.tokens(text)
            if cost > left:
                parts.append(f"### {shown_name}: too long to show here ({d.path} lines {d.start}-{d.end})")
                continue
            parts.append(text)
            left -= cost
            shown.add((d.path, d.qualname))
            entry = piece.entry()
            entry["lines"] = f"{lo}-{hi}"
            out.entries.append(entry)
    out.text = "\n\n".join(parts)
    return out
