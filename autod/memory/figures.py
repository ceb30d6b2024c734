"""What the memory store holds, in figures: items per tier (chromadb's count and this daemon's own),
what the spool tallied, holds and dropped, and the disk an embedded store takes. `autod memory stats`,
`autod status` and the metrics read them. Mixed into `autod.memory.store.ChromaMemory`, which supplies
the collections, the memory thread and the spool."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from autod.memory import Tier
from autod.memory.chroma import TIERS, Connection
from autod.memory.identity import Identity
from autod.memory.retention import count
from autod.memory.spool import Spool


class Figures:
    """Counts and stats of a ChromaMemory (mixed into it)."""

    server: bool
    location: str
    who: Identity
    spool: Spool | None
    _cols: dict[Tier, Any]
    _conn: Connection
    _run: Callable[..., Awaitable[Any]]
    _run_job: Callable[[Callable[[], Any]], Awaitable[Any]]
    _where: Callable[..., dict[str, Any] | None]

    async def counts(self) -> dict[str, int]:
        """Items per tier in the collections (everyone's): chromadb's count, no scan."""
        return await self._run(lambda: {t.value: int(self._cols[t].count()) for t in TIERS})

    async def own_counts(self) -> dict[str, int]:
        """This daemon's items per tier, counted in the store (pages of ids in a shared store)."""
        return {t.value: await count(self._run_job, self._cols[t], self._where(t, everyone=False))
                for t in TIERS}

    async def stats(self) -> dict[str, Any]:
        """Per-tier counts (chromadb's count and the tally of this daemon's items), spool, disk use."""
        totals = await self.counts()
        spool = self.spool
        tally = await asyncio.to_thread(spool.tally) if spool is not None else {}
        pending = await asyncio.to_thread(spool.pending) if spool is not None else {}
        dropped = await asyncio.to_thread(spool.dropped) if spool is not None else {}
        names = {t: c.name for t, c in self._cols.items()}
        tiers: dict[str, Any] = {}
        for tier in TIERS:
            t = tally.get(tier.value, {})
            tiers[tier.value] = {
                "collection": names[tier],
                "count": totals[tier.value],
                # a collection of this daemon's own (all but the shared lessons) counts exactly, for free
                "own": t.get("own", 0) if self.server and tier is Tier.N2 else totals[tier.value],
                "oldest_ts": t.get("oldest_ts"),
                "newest_ts": t.get("newest_ts"),
                "spooled": pending.get(tier.value, 0),
                "dropped": dropped.get(tier.value, 0),
            }
        disk = self._conn.disk_path
        return {
            "mode": "server" if self.server else "embedded",
            "location": self.location,
            "instance": self.who.instance,
            "tiers": tiers,
            "spooled": sum(pending.values()),
            "dropped": dropped,
            "pending_observations": pending.get("n0", 0),
            "dropped_observations": dropped.get("n0", 0),
            "disk_bytes": await asyncio.to_thread(_dir_size, disk) if disk is not None else None,
        }


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
