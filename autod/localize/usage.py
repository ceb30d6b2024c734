"""How definitions are used: their callers across the workspace, rendered for a prompt (auto-doc)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from autod.linebreaks import lines_of
from autod.localize import render
from autod.localize.frames import is_test_path
from autod.localize.index import build_index
from autod.localize.rank import Piece
from autod.localize.resolve import Resolver

if TYPE_CHECKING:
    from autod.config.settings import Settings
    from autod.safety.boundary import Boundary

PER_TARGET = 3  # callers shown for one definition, at most


async def callers_text(
    settings: Settings, boundary: Boundary, targets: list[tuple[str, int]], budget_tokens: int
) -> render.Rendered:
    """The callers of the definitions at these (path, line)s, whole, non-test callers first."""
    cfg = settings.localize
    index = await asyncio.to_thread(
        build_index,
        boundary,
        first=[p for p, _ in targets],
        max_files=cfg.index_max_files,
        max_bytes=cfg.index_max_mb * 2**20,
        max_summary=cfg.index_max_summary_mb * 2**20,
        timeout_s=cfg.index_timeout_s,
    )

    def collect() -> render.Rendered:
        resolver = Resolver(index)
        pieces: list[Piece] = []
        seen: set[tuple[str, str]] = set()
        for i, (path, line) in enumerate(targets[:20]):
            mod = index.modules.get(path)
            d = mod.enclosing(line) if mod else None
            if d is None:
                continue
            found = sorted(resolver.callers(d, limit=PER_TARGET * 3), key=lambda c: is_test_path(c.path))
            for c in found[:PER_TARGET]:
                if (c.path, c.qualname) not in seen:
                    seen.add((c.path, c.qualname))
                    pieces.append(Piece(c.path, c.start, c.end, f"calls {d.qualname}", i, c.qualname))

        def read_lines(rel: str) -> list[str] | None:
            body = boundary.read_text(rel)
            return lines_of(body) if body is not None else None

        return render.fill(pieces, read_lines, budget_tokens)

    return await asyncio.to_thread(collect)
