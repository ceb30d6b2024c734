"""ResilientMemory: the daemon's memory, always there and always honest about its state.

The store (ChromaMemory, embedded or a shared Chroma server) may be slow, hung, dead, refusing
our token or not there yet. None of that stops a cycle:

- **Writes** (observations, episodes, lessons, lesson-use marks) go to the local spool first
  (spool.py) and the spool writer (writer.py) replays them to the store in order, in batches; an
  accepted write is never lost to an outage, a hang or a crash. Only a full spool drops, least
  valuable first, counted per tier.
- **Every store call has a deadline** (``memory.timeout_s``). A call that fails or outlives it
  turns the memory *degraded* (``status``: ``memory: degraded (why, since when)``); a stuck
  memory thread is abandoned, never waited for. Recall while degraded returns nothing at once:
  the cycle goes on without memory.
- **The connection** (connection.py) opens the store in the background (start-up never waits
  longer than ``memory.open_wait_s``) and, once degraded, reopens it with exponential backoff
  and jitter; SIGHUP (``reload``) retries at once and applies a changed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from autod import logs
from autod.config.settings import MemoryConfig
from autod.memory import Embedder, Recalled, Tier
from autod.memory.chroma import TIERS, clean_metadata, collection_names
from autod.memory.connection import (
    CLOSED,
    DEGRADED,
    OK,
    OPENING,
    MemoryUnavailable,
    Opener,
    Store,
    StoreConnection,
)
from autod.memory.identity import Identity, identity
from autod.memory.spool import FILE_NAME, KINDS, Spool
from autod.memory.writer import BATCH_ITEMS, REFUSALS_BEFORE_DROP, SpoolWriter

__all__ = ["CLOSED", "DEGRADED", "OK", "OPENING", "REFUSALS_BEFORE_DROP", "MemoryUnavailable",
           "ResilientMemory"]

log = structlog.get_logger("autod.memory")

CLOSE_DRAIN_S = 5.0  # at stop, the spool gets at most this long; the rest waits for the next start
SPOOL_FULL_LOG_S = 60.0


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


class ResilientMemory:
    """The Memory protocol over a spool and a store that may come and go; see the module doc."""

    def __init__(self, cfg: MemoryConfig, spool: Spool, who: Identity, opener: Opener, *,
                 token: str | None, dropped: dict[str, int], last_rw: int) -> None:
        self.who = who
        self._spool = spool
        self._dropped = dropped
        self._last_rw = last_rw  # the newest episode or lesson spooled: recall waits until it is written
        self._spool_full_logged = 0.0
        self._conn = StoreConnection(cfg, opener, token=token, spooled=lambda: len(spool),
                                     on_open=lambda: self._writer.kick())
        self._writer = SpoolWriter(spool, self._conn, dropped)
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def start(cls, cfg: MemoryConfig, state_dir: Path, *, workspace: Path | str,
                    token: str | None = None, embedder: Embedder | None = None,
                    opener: Opener | None = None) -> ResilientMemory:
        """Open the spool and start opening the store in the background; returns at once."""
        spool = await asyncio.to_thread(Spool, Path(state_dir) / FILE_NAME, cfg.spool_max_items)
        who = await asyncio.to_thread(identity, Path(state_dir), workspace)
        dropped = await asyncio.to_thread(spool.dropped)
        last_rw = await asyncio.to_thread(spool.last_seq, ("n1", "n2"))  # left by the last run
        if opener is None:
            opener = _chroma_opener(Path(state_dir), who, spool, embedder)
        mem = cls(cfg, spool, who, opener, token=token, dropped=dropped, last_rw=last_rw)
        mem._tasks = [asyncio.create_task(mem._conn.run(), name="memory-connector"),
                      asyncio.create_task(mem._writer.run(), name="memory-writer"),
                      asyncio.create_task(mem._warm(), name="memory-warmup")]
        return mem

    async def _warm(self) -> None:
        """Load the embedding model once the store is first open, off every cycle's path: the local
        model loads on first use, and the first cycle's recall paid for it (0.5 s of autod's own time
        in each fix of bench/bench_realllm.py, which starts a daemon per bug). A model that fails to
        load fails the first recall as before: logged here, the memory left to its own handling."""
        await self._conn.until(lambda: self.state != OPENING, None)
        store = self._store
        if self.state != OK or store is None:
            return
        try:
            await asyncio.wait_for(asyncio.to_thread(store.warm), self.cfg.timeout_s)
        except Exception as exc:
            log.warning("memory.warm_failed", error=type(exc).__name__)
        else:
            log.info("memory.warmed")  # the model is in memory: what a measurement of RSS waits for

    # -- health ------------------------------------------------------------------------------
    @property
    def cfg(self) -> MemoryConfig:
        return self._conn.cfg

    @property
    def state(self) -> str:
        return self._conn.state

    @property
    def why(self) -> str | None:
        return self._conn.why

    @property
    def _store(self) -> Store | None:
        return self._conn.store

    def status(self) -> dict[str, Any]:
        """State, why, since when, and what waits in the spool or was dropped (per tier)."""
        c = self._conn
        return {"state": c.state, "why": c.why, "since": _stamp(c.since), "location": c.cfg.url or "embedded",
                "instance": self.who.instance, "spooled": self._spooled(), "dropped": dict(self._dropped)}

    def summary(self) -> str:
        """One line for `autod status`: ``ok``, or ``degraded (why, since when)``."""
        c, spooled, lost = self._conn, self._spooled(), sum(self._dropped.values())
        tail = (f"; {spooled} writes spooled" if spooled else "") + (f"; {lost} dropped" if lost else "")
        if c.state == OK:
            return f"ok ({tail[2:]})" if tail else "ok"
        reason = f"{c.why}, " if c.why else ""
        return f"{c.state} ({reason}since {_stamp(c.since)}{tail})"

    def _spooled(self) -> int:
        return len(self._spool) if self.state != CLOSED else 0

    # -- life cycle ------------------------------------------------------------------------
    async def wait_open(self, timeout: float, extend: Callable[[float], object] | None = None) -> bool:
        """Wait (at most timeout) for the first open attempt; True if the store is there.

        ``extend(seconds)`` is called every few seconds meanwhile (systemd EXTEND_TIMEOUT_USEC).
        """
        end = time.monotonic() + timeout
        while self.state == OPENING and (left := end - time.monotonic()) > 0:
            if extend is not None:
                extend(min(left, 5.0) + 10.0)
            await self._conn.until(lambda: self.state != OPENING, min(left, 5.0))
        return self.state == OK

    def reload(self, cfg: MemoryConfig, *, token: str | None) -> None:
        """A new config (SIGHUP): retry a degraded store now; reconnect if the connection changed."""
        self._spool.max_items = cfg.spool_max_items
        self._conn.reload(cfg, token=token)

    async def close(self) -> None:
        """Write what the spool holds (briefly), stop the tasks, close the store; never hangs."""
        if self.state == CLOSED:
            return
        if self.state == OK and len(self._spool):
            self._writer.kick(flush=True)
            await self._conn.until(lambda: self.state != OK or not len(self._spool),
                                   min(self.cfg.timeout_s, CLOSE_DRAIN_S))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError), logs.survive("memory.stop_failed"):
                await task
        await self._conn.close()
        if left := len(self._spool):
            log.info("memory.spool_kept", writes=left, why="the store gets them at the next start")
        await asyncio.to_thread(self._spool.close)

    # -- the Memory protocol -----------------------------------------------------------------
    async def _accept(self, kind: str, text: str, metadata: dict[str, Any], *, success: bool | None = None,
                      now: float | None = None) -> tuple[str, int]:
        if self.state == CLOSED:
            raise MemoryUnavailable("memory is closed")
        now = time.time() if now is None else now
        item_id = uuid.uuid4().hex
        try:
            # ts=now: when it was accepted; the observation batching and a lesson's age count from it
            seq, dropped = await asyncio.to_thread(self._append, kind, item_id, text, metadata, success, now)
        except (sqlite3.Error, OSError) as exc:  # a full disk must not fail the cycle that writes
            self._dropped[kind] = self._dropped.get(kind, 0) + 1
            log.error("memory.spool_failed", tier=kind, error=f"{type(exc).__name__}: {exc}")
            return item_id, 0
        if dropped:
            self._spool_full(dropped)
        if kind in ("n1", "n2"):
            self._last_rw = seq
        # The writer idles until there is something worth a write: a batch, or anything but observations.
        if kind != "n0" or self._spool.pending()["n0"] in (1, BATCH_ITEMS):
            self._writer.kick()
        return item_id, seq

    def _append(self, kind: str, item_id: str, text: str, metadata: dict[str, Any], success: bool | None,
                now: float) -> tuple[int, dict[str, int]]:
        """Spool one item, redacted here whoever wrote it (off the loop): memory is recalled into prompts
        and printed by `autod memory search`, and a rejection's reason had quoted the API key into it."""
        return self._spool.append(kind, item_id, logs.redact_text(text),
                                  clean_metadata(logs.redact_tree(metadata), now), success=success, ts=now)

    def _spool_full(self, dropped: dict[str, int]) -> None:
        for kind, n in dropped.items():
            self._dropped[kind] = self._dropped.get(kind, 0) + n
        now = time.monotonic()
        if now - self._spool_full_logged >= SPOOL_FULL_LOG_S:
            self._spool_full_logged = now
            log.warning("memory.spool_full", max_items=self._spool.max_items, dropped=dict(self._dropped))

    async def observe(self, text: str, metadata: dict[str, Any]) -> str:
        """Accept an N0 observation (spooled, written in a batch within ~0.5 s); returns its id."""
        item_id, _ = await self._accept("n0", text, metadata)
        return item_id

    async def add_episode(self, text: str, metadata: dict[str, Any], *, defer: bool = False) -> str:
        """Accept an N1 episode; without defer, wait (up to the deadline) until the store has it."""
        item_id, seq = await self._accept("n1", text, metadata)
        if not defer:
            await self._writer.written(seq, self.cfg.timeout_s)
        return item_id

    async def add_lesson(self, text: str, metadata: dict[str, Any], *, success: bool, defer: bool = False,
                         now: float | None = None) -> str:
        """Accept an N2 lesson; returns the lesson it became once written ("" if deferred or not yet)."""
        item_id, seq = await self._accept("n2", text, metadata, success=success, now=now)
        if defer or not await self._writer.written(seq, self.cfg.timeout_s):
            return ""
        return self._writer.lesson_ids.pop(item_id, "")

    async def flush(self) -> None:
        """Write everything spooled now, if the store is there (a spooled write is durable anyway)."""
        if self.state != OK:
            return
        tail = await asyncio.to_thread(self._spool.last_seq, KINDS)
        if tail > self._writer.applied:
            await self._writer.written(tail, None)

    async def recall(self, query: str, *, budget_tokens: int, k: int = 8, now: float | None = None
                     ) -> list[Recalled]:
        """The best memories for a query; nothing (at once) while the store is not there."""
        if self.state != OK:
            return []
        # Read your own writes: the last cycle's episode and lesson are in the store first.
        if self._last_rw > self._writer.applied:
            await self._writer.written(self._last_rw, self.cfg.timeout_s)
        store = self._store
        if self.state != OK or store is None:
            return []
        now = time.time() if now is None else now
        try:
            hits = await store.recall(query, budget_tokens=budget_tokens, k=k, now=now)
        except Exception as exc:
            if await self._conn.failed(store, exc):
                return []
            raise
        self._conn.proved()
        # Marks for our own lessons (another daemon's are theirs to age), spooled in one go.
        marks = [h.id for h in hits if h.tier is Tier.N2 and not h.metadata.get("foreign")]
        if marks and self.state != CLOSED:
            if dropped := await asyncio.to_thread(self._spool.append_marks, marks, now):
                self._spool_full(dropped)
            self._writer.kick()
        return hits

    # -- operators ---------------------------------------------------------------------------
    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]:
        await self.flush()
        store = self._conn.require(self.summary)
        try:
            return await store.search(query, tier=tier, k=k)
        except Exception as exc:
            if await self._conn.failed(store, exc):
                raise MemoryUnavailable(f"memory is {self.summary()}") from None
            raise

    async def prune(self, *, dry_run: bool = False, scheduled: bool = False) -> dict[str, int]:
        """Apply retention; a scheduled prune first waits this instance's share of prune_spread_s."""
        if scheduled:
            delay = self.who.share(prune_spread(self.cfg))
            log.info("memory.prune_scheduled", in_s=delay)
            await asyncio.sleep(delay)
        store = self._conn.require(self.summary)
        try:
            return await store.prune(dry_run=dry_run)
        except Exception as exc:
            if await self._conn.failed(store, exc):
                raise MemoryUnavailable(f"memory is {self.summary()}") from None
            raise

    async def stats(self) -> dict[str, Any]:
        """The store's figures when it is there, the local ledger's otherwise; always the health."""
        figures: dict[str, Any] | None = None
        store = self._store
        if self.state == OK and store is not None:
            try:
                figures = await store.stats()
            except Exception as exc:
                await self._conn.failed(store, exc)
        if figures is None:
            figures = await asyncio.to_thread(self._ledger_stats)
        figures.update(self.status(), memory=self.summary())
        return figures

    def _ledger_stats(self) -> dict[str, Any]:
        tally, pending, dropped = self._spool.tally(), self._spool.pending(), self._spool.dropped()
        names = collection_names(self.cfg.collection_prefix, self.who.instance if self.cfg.url else None)
        tiers = {t.value: {"collection": names[t], "count": None, "own": tally.get(t.value, {}).get("own", 0),
                           "oldest_ts": tally.get(t.value, {}).get("oldest_ts"),
                           "newest_ts": tally.get(t.value, {}).get("newest_ts"),
                           "spooled": pending.get(t.value, 0), "dropped": dropped.get(t.value, 0)}
                 for t in TIERS}
        return {"mode": "server" if self.cfg.url else "embedded", "tiers": tiers,
                "pending_observations": pending.get("n0", 0), "dropped_observations": dropped.get("n0", 0),
                "disk_bytes": None}


def prune_spread(cfg: MemoryConfig) -> int:
    """The window a scheduled prune is spread over: prune_spread_s, at most half the schedule's period
    (a prune every minute, as in a soak, must still run every minute or so)."""
    from apscheduler.triggers.cron import CronTrigger

    trigger = CronTrigger.from_crontab(cfg.prune_schedule, timezone="UTC")
    first = trigger.get_next_fire_time(None, datetime.now(UTC))
    second = trigger.get_next_fire_time(first, first + timedelta(seconds=1)) if first else None
    period = (second - first).total_seconds() if first and second else float(cfg.prune_spread_s) * 2
    return int(min(cfg.prune_spread_s, period / 2))


def _chroma_opener(state_dir: Path, who: Identity, spool: Spool, embedder: Embedder | None) -> Opener:
    """Open a ChromaMemory; the embedder is made once and kept across reconnects (unless reloaded)."""
    made: dict[tuple[str, str | None, str], Embedder] = {}
    if embedder is not None:
        made[("given", None, "")] = embedder

    async def open_store(cfg: MemoryConfig, token: str | None) -> Store:
        from autod.memory.embed import make_embedder
        from autod.memory.store import ChromaMemory

        key = ("given", None, "") if embedder is not None else (cfg.embedder, cfg.embed_url, cfg.embed_model)
        if key not in made:
            made.clear()
            made[key] = make_embedder(cfg)
        return await ChromaMemory.open(cfg, state_dir, embedder=made[key], who=who, token=token, spool=spool)

    return open_store
