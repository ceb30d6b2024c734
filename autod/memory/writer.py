"""The spool writer: replays accepted writes from the spool to the store, in order, in batches.

Observations and lesson-use marks wait up to ``BATCH_INTERVAL_S`` for company (one embedding
call and one commit for many, and not in the middle of the cycle that made them); episodes and
lessons go at once. A write goes out of the spool only once the store has it. A failure that is
an outage degrades the connection and the rows wait; a write the reachable store refuses
``REFUSALS_BEFORE_DROP`` times is dropped, counted and logged, so one bad row never blocks the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from autod.memory import Tier
from autod.memory.connection import OK, Store, StoreConnection
from autod.memory.spool import Row, Spool

log = structlog.get_logger("autod.memory")

BATCH_ITEMS = 64  # observations per store write
EPISODES_PER_WRITE = 16
BATCH_INTERVAL_S = 0.5  # an observation waits at most this long for company
LAZY = ("n0", "used")  # writes nobody waits for: batched over the interval
REFUSALS_BEFORE_DROP = 5


class SpoolWriter:
    """One task: spool head -> store, acknowledging what landed."""

    def __init__(self, spool: Spool, conn: StoreConnection, dropped: dict[str, int]) -> None:
        self._spool = spool
        self._conn = conn
        self._dropped = dropped  # shared with the memory's status: drops are counted per tier
        self.applied = 0  # the last spool seq the store has
        self.lesson_ids: dict[str, str] = {}  # spooled lesson id -> the lesson it became
        self.flush_now = False  # write what is there without the batching wait
        self._kick = asyncio.Event()

    def kick(self, *, flush: bool = False) -> None:
        """Something is spooled (or the store is back): look now; flush skips the batching wait."""
        self.flush_now = self.flush_now or flush
        self._kick.set()

    async def written(self, seq: int, timeout: float | None) -> bool:
        """Flush, and wait (at most timeout) until the store has everything up to seq."""
        self.kick(flush=True)
        conn = self._conn
        await conn.until(lambda: self.applied >= seq or conn.state != OK, timeout)
        return self.applied >= seq

    async def run(self) -> None:
        conn = self._conn
        while True:
            store = conn.store
            if conn.state != OK or store is None:
                await self._wait(None)
                continue
            rows = await asyncio.to_thread(self._spool.head, BATCH_ITEMS)
            if not rows:
                self.flush_now = False
                conn.notify()
                await self._wait(None)
                continue
            if not self.flush_now and len(rows) < BATCH_ITEMS and all(r.kind in LAZY for r in rows):
                wait = rows[0].ts + BATCH_INTERVAL_S - time.time()
                if wait > 0:
                    await self._wait(wait)
                    continue
            group = leading_group(rows)
            try:
                await self._apply(store, group)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._failed(store, group, exc)
                continue
            await asyncio.to_thread(self._spool.ack, group)
            self.applied = group[-1].seq
            conn.proved()
            conn.notify()

    async def _wait(self, timeout: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._kick.wait(), timeout)
        self._kick.clear()

    async def _apply(self, store: Store, group: list[Row]) -> None:
        kind = group[0].kind
        if kind in ("n0", "n1"):
            await store.add(Tier(kind), [(r.item_id, r.text, r.meta) for r in group])
        elif kind == "n2":
            (r,) = group
            self.lesson_ids[r.item_id] = await store.add_lesson(r.text, r.meta, success=bool(r.success),
                                                                item_id=r.item_id, now=r.ts)
        else:
            used: dict[str, float] = {}
            for r in group:
                used[r.item_id] = max(r.ts, used.get(r.item_id, 0.0))
            await store.mark_used(used)

    async def _failed(self, store: Store, group: list[Row], exc: Exception) -> None:
        if await self._conn.failed(store, exc):
            return  # degraded: the rows stay spooled until the store is back
        head = group[0]
        attempts = await asyncio.to_thread(self._spool.failed, head)
        error = self._conn.why_of(exc)
        if attempts < REFUSALS_BEFORE_DROP:
            log.warning("memory.write_refused", tier=head.kind, attempts=attempts, error=error)
            await asyncio.sleep(self._conn.cfg.retry_min_s)
            return
        # The store answers but refuses this write every time: keep the rest flowing.
        await asyncio.to_thread(self._spool.drop, [head])
        self._dropped[head.kind] = self._dropped.get(head.kind, 0) + 1
        self.applied = head.seq  # settled: nobody waits for it any longer
        self._conn.notify()
        log.error("memory.write_dropped", tier=head.kind, attempts=attempts, error=error)


def leading_group(rows: list[Row]) -> list[Row]:
    """The longest run of same-kind rows at the head that one store call can take."""
    kind = rows[0].kind
    limit = {"n0": BATCH_ITEMS, "n1": EPISODES_PER_WRITE, "n2": 1}.get(kind, len(rows))
    group: list[Row] = []
    for r in rows:
        if r.kind != kind or len(group) >= limit:
            break
        group.append(r)
    return group
