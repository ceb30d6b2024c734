"""Retention: each tier's TTL, then its max_items, over this daemon's items (or everyone's).

A prune is many short jobs on the memory thread (a page of ids, a delete of a page), never one
long one, so a recall that arrives meanwhile waits for one page at most. TTL needs no scan: the
store finds expired items with a filter. The eviction scan (metadata of every item in scope) runs
only when a tier is over max_items. What a prune learns reconciles the tally (spool.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import structlog

from autod.config.settings import MemoryConfig, Retention
from autod.memory import Tier
from autod.memory.chroma import PAGE, TIERS, both, page
from autod.memory.spool import Spool

log = structlog.get_logger("autod.memory")
T = TypeVar("T")
Run = Callable[[Callable[[], T]], Awaitable[T]]
COUNT_PAGE = 5000  # ids only: a count is cheap per row
DELETE_PAGE = 200


def lesson_usefulness(metadata: Mapping[str, Any]) -> float:
    """Laplace-smoothed success rate of a lesson; the least useful is evicted first."""
    return (int(metadata.get("successes", 0)) + 1) / (int(metadata.get("uses", 0)) + 2)


def eviction_order(tier: Tier, rows: list[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Ids in the order they should go when a tier is over max_items."""
    if tier is Tier.N2:
        rows = sorted(rows, key=lambda r: (lesson_usefulness(r[1]), float(r[1].get("last_used", 0.0)), r[0]))
    else:
        rows = sorted(rows, key=lambda r: (float(r[1].get("ts", 0.0)), r[0]))
    return [r[0] for r in rows]


def age_key(tier: Tier) -> str:
    # A lesson recalled yesterday is alive however old it is: N2 ages by last use.
    return "last_used" if tier is Tier.N2 else "ts"


async def _delete(run: Run[Any], col: Any, ids: list[str]) -> None:
    # A delete costs ~0.5 ms per item (index and sqlite): small jobs keep a recall's wait short.
    for start in range(0, len(ids), DELETE_PAGE):
        await run(partial(col.delete, ids=ids[start : start + DELETE_PAGE]))


async def count(run: Run[Any], col: Any, where: dict[str, Any] | None) -> int:
    """Items matching where: chromadb's count for everything, else pages of ids."""
    if where is None:
        return int(await run(col.count))
    total = offset = 0
    while True:
        ids, _ = await run(partial(page, col, where, offset=offset, limit=COUNT_PAGE))
        total += len(ids)
        offset += len(ids)
        if len(ids) < COUNT_PAGE:
            return total


@dataclass(frozen=True)
class Target:
    """One collection to prune: which of its items retention applies to, and which are ours."""

    tier: Tier
    col: Any
    scope: dict[str, Any] | None  # None: every item in the collection
    own: dict[str, Any] | None  # this daemon's items in it (None: all of them)
    mine: bool = True  # it holds this daemon's items: what the prune learns reconciles the tally


async def prune(run: Run[Any], targets: list[Target], cfg: MemoryConfig, *, dry_run: bool, now: float,
                spool: Spool | None) -> dict[str, int]:
    """Apply TTL then max_items to each target; returns how many went (or would) per tier."""
    removed = {tier.value: 0 for tier in TIERS}
    for t in targets:
        retention: Retention = getattr(cfg, t.tier.value)
        removed[t.tier.value] += await _prune_tier(run, t, retention, dry_run=dry_run, now=now,
                                                   spool=spool if t.mine else None)
    if not dry_run and any(removed.values()):
        log.info("memory.retention_applied", **removed)
    return removed


async def _prune_tier(run: Run[Any], t: Target, retention: Retention, *, dry_run: bool, now: float,
                      spool: Spool | None) -> int:
    col, tier, scope = t.col, t.tier, t.scope
    expired: set[str] = set()
    n_expired = 0
    cutoff: float | None = None
    if retention.ttl_days is not None:
        cutoff = now - retention.ttl_days * 86400
        where = both(scope, {age_key(tier): {"$lt": cutoff}})
        offset = 0
        while True:
            ids, _ = await run(partial(page, col, where, offset=offset))
            if dry_run:  # nothing is deleted: page on
                expired.update(ids)
                offset += len(ids)
            elif ids:  # deleted: the next page is again at offset 0
                await _delete(run, col, ids)
            n_expired += len(ids)
            if len(ids) < PAGE:
                break
    left = await count(run, col, scope) - (n_expired if dry_run else 0)
    evict: list[str] = []
    kept: list[tuple[str, Mapping[str, Any]]] | None = None
    if left > retention.max_items:
        rows: list[tuple[str, Mapping[str, Any]]] = []
        offset = 0
        while True:
            ids, metas = await run(partial(page, col, scope, offset=offset, metadata=True))
            rows.extend((i, m) for i, m in zip(ids, metas, strict=True) if i not in expired)
            offset += len(ids)
            if len(ids) < PAGE:
                break
        evict = eviction_order(tier, rows)[: len(rows) - retention.max_items]
        if not dry_run:
            await _delete(run, col, evict)
        gone = set(evict)
        kept = [r for r in rows if r[0] not in gone]
    if not dry_run and spool is not None:
        await _reconcile(run, t, spool, left=left - len(evict), kept=kept, cutoff=cutoff)
    return n_expired + len(evict)


async def _reconcile(run: Run[Any], t: Target, spool: Spool, *, left: int,
                     kept: list[tuple[str, Mapping[str, Any]]] | None, cutoff: float | None) -> None:
    tier = t.tier.value
    if t.scope != t.own:  # pruned everyone's items: count our own separately
        left = await count(run, t.col, t.own)
        kept = None
    if kept is not None:  # the eviction scan saw every item left: the exact range
        stamps = [float(m["ts"]) for _, m in kept if isinstance(m.get("ts"), int | float)]
        await run(partial(spool.tally_set, tier, left, oldest=min(stamps, default=None),
                          newest=max(stamps, default=None), exact_range=True))
        return
    await run(partial(spool.tally_set, tier, left))
    if cutoff is not None and t.tier is not Tier.N2:  # N2 ages by last use; its range is by ts
        await run(partial(spool.tally_removed, tier, 0, older_than=cutoff))
