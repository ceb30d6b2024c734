"""ResilientMemory: the daemon's memory, always there and always honest about its state.

The store (ChromaMemory, embedded or a shared Chroma server) may be slow, hung, dead, refusing
our token or not there yet. None of that stops a cycle:

- **Writes** (observations, episodes, lessons, lesson-use marks) go to the local spool first
  (spool.py) and a writer task replays them to the store in order, in batches; an accepted write
  is never lost to an outage, a hang or a crash. Only a full spool drops, least valuable first,
  counted per tier.
- **Every store call has a deadline** (``memory.timeout_s``). A call that fails or outlives it
  turns the memory *degraded* (``status``: ``memory: degraded (why, since when)``); a stuck
  memory thread is abandoned, never waited for. Recall while degraded returns nothing at once:
  the cycle goes on without memory.
- **A connector task** opens the store in the background (start-up never waits longer than
  ``memory.open_wait_s``) and, once degraded, reopens it with exponential backoff and jitter;
  SIGHUP (``reload``) retries at once and applies a changed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import structlog

from autod.config import MemoryConfig
from autod.memory import Embedder, Recalled, Tier
from autod.memory.chroma import clean_metadata
from autod.memory.identity import Identity, identity
from autod.memory.spool import FILE_NAME, KINDS, Row, Spool
from autod.memory.worker import StoreTimeout

log = structlog.get_logger("autod.memory")

OPENING, OK, DEGRADED, CLOSED = "opening", "ok", "degraded", "closed"
BATCH_ITEMS = 64  # observations per store write
EPISODES_PER_WRITE = 16
BATCH_INTERVAL_S = 0.5  # an observation waits at most this long for company
LAZY = ("n0", "used")  # writes nobody waits for: batched over the interval
REFUSALS_BEFORE_DROP = 5  # a write the (reachable) store keeps refusing is dropped, counted, logged
CLOSE_DRAIN_S = 5.0  # at stop, the spool gets at most this long; the rest waits for the next start
SPOOL_FULL_LOG_S = 60.0
# What changes the connection; anything else in memory: applies to the open store at once.
CONNECTION_KEYS = (
    "url",
    "tenant",
    "database",
    "collection_prefix",
    "auth_header",
    "timeout_s",
    "embedder",
    "embed_url",
    "embed_model",
    "auth_token",
    "auth_token_file",
)


class MemoryUnavailable(RuntimeError):
    """An operator command (search, prune) needs the store and it is not there; says why."""


class Store(Protocol):
    """What ResilientMemory needs from a store (ChromaMemory); the seam tests script failures at."""

    cfg: MemoryConfig
    location: str

    async def add(
        self, tier: Tier, items: list[tuple[str, str, dict[str, Any]]], *, now: float | None = None
    ) -> None: ...
    async def add_lesson(
        self, text: str, metadata: dict[str, Any], *, success: bool, item_id: str, now: float | None = None
    ) -> str: ...
    async def mark_used(self, used: dict[str, float]) -> None: ...
    async def heartbeat(self) -> None: ...
    async def recall(
        self, query: str, *, budget_tokens: int, k: int = 8, now: float | None = None
    ) -> list[Recalled]: ...
    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]: ...
    async def prune(self, *, dry_run: bool = False, now: float | None = None) -> dict[str, int]: ...
    async def stats(self) -> dict[str, Any]: ...
    async def close(self) -> None: ...
    def abandon(self) -> None: ...
    def stuck(self) -> bool: ...


Opener = Callable[[MemoryConfig, "str | None"], Awaitable[Store]]


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


class ResilientMemory:
    """The Memory protocol over a spool and a store that may come and go; see the module doc."""

    def __init__(
        self,
        cfg: MemoryConfig,
        spool: Spool,
        who: Identity,
        opener: Opener,
        *,
        token: str | None,
        dropped: dict[str, int],
    ) -> None:
        self.cfg = cfg
        self.who = who
        self._spool = spool
        self._opener = opener
        self._token = token
        self._store: Store | None = None
        self.state, self.why, self.since = OPENING, "opening the store", time.time()
        self._dropped = dropped
        self._applied = 0  # the last spool seq the store has
        self._last_rw = 0  # the newest episode or lesson spooled: recall waits until the store has it
        self._lesson_ids: dict[str, str] = {}  # spooled lesson id -> the lesson it became
        self._flush_now = False
        self._kick = asyncio.Event()  # wake the writer
        self._trouble = asyncio.Event()  # wake the connector
        self._changed = asyncio.Event()  # replaced on every change; waiters hold the old one
        self._delay = cfg.retry_min_s
        self._retry_now = False
        self._abandoned: list[Store] = []  # stores given up on while a call of theirs was stuck
        self._spool_full_logged = 0.0
        self._down_since: float | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- life cycle ------------------------------------------------------------------------
    @classmethod
    async def start(
        cls,
        cfg: MemoryConfig,
        state_dir: Path,
        *,
        workspace: Path | str,
        token: str | None = None,
        embedder: Embedder | None = None,
        opener: Opener | None = None,
    ) -> ResilientMemory:
        """Open the spool and start opening the store in the background; returns at once."""
        spool = await asyncio.to_thread(Spool, Path(state_dir) / FILE_NAME, cfg.spool_max_items)
        who = await asyncio.to_thread(identity, Path(state_dir), workspace)
        dropped = await asyncio.to_thread(spool.dropped)
        last_rw = await asyncio.to_thread(spool.last_seq, ("n1", "n2"))  # left by the last run
        if opener is None:
            opener = _chroma_opener(Path(state_dir), who, spool, embedder)
        mem = cls(cfg, spool, who, opener, token=token, dropped=dropped)
        mem._last_rw = last_rw
        mem._tasks = [
            asyncio.create_task(mem._connect_loop(), name="memory-connector"),
            asyncio.create_task(mem._write_loop(), name="memory-writer"),
        ]
        return mem

    async def wait_open(self, timeout: float, extend: Callable[[float], object] | None = None) -> bool:
        """Wait (at most timeout) for the first open attempt; True if the store is there.

        ``extend(seconds)`` is called every few seconds meanwhile (systemd EXTEND_TIMEOUT_USEC).
        """
        end = time.monotonic() + timeout
        while self.state == OPENING and (left := end - time.monotonic()) > 0:
            if extend is not None:
                extend(min(left, 5.0) + 10.0)
            await self._until(lambda: self.state != OPENING, min(left, 5.0))
        return self.state == OK

    def reload(self, cfg: MemoryConfig, *, token: str | None) -> None:
        """A new config (SIGHUP): retry a degraded store now; reconnect if the connection changed."""
        old, self.cfg = self.cfg, cfg
        self._spool.max_items = cfg.spool_max_items
        store = self._store
        if any(getattr(old, k) != getattr(cfg, k) for k in CONNECTION_KEYS) or token != self._token:
            self._token = token
            if store is not None:
                self._drop_store(store, abandon=False)
            self._set_state(OPENING, "reconnecting after a config reload")
        elif store is not None:
            store.cfg = cfg  # retention, trust and prune scope apply from the next call
        self._delay = cfg.retry_min_s
        self._retry_now = True
        self._trouble.set()

    async def close(self) -> None:
        """Write what the spool holds (briefly), stop the tasks, close the store; never hangs."""
        if self.state == CLOSED:
            return
        if self.state == OK and len(self._spool):
            self._flush_now = True
            self._kick.set()
            await self._until(
                lambda: self.state != OK or not len(self._spool), min(self.cfg.timeout_s, CLOSE_DRAIN_S)
            )
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):
                await store.close()  # bounded by the store's own deadline
        left = len(self._spool)
        if left:
            log.info("memory.spool_kept", writes=left, why="the store gets them at the next start")
        await asyncio.to_thread(self._spool.close)
        self._set_state(CLOSED, None)

    # -- health ------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """State, why, since when, and what waits in the spool or was dropped (per tier)."""
        return {
            "state": self.state,
            "why": self.why,
            "since": _stamp(self.since),
            "location": self.cfg.url or "embedded",
            "instance": self.who.instance,
            "spooled": len(self._spool) if self.state != CLOSED else 0,
            "dropped": dict(self._dropped),
        }

    def summary(self) -> str:
        """One line for `autod status`: ``ok``, or ``degraded (why, since when)``."""
        spooled = len(self._spool) if self.state != CLOSED else 0
        tail = f"; {spooled} writes spooled" if spooled else ""
        lost = sum(self._dropped.values())
        tail += f"; {lost} dropped" if lost else ""
        if self.state == OK:
            return f"ok{f' ({tail[2:]})' if tail else ''}"
        reason = f"{self.why}, " if self.why else ""
        return f"{self.state} ({reason}since {_stamp(self.since)}{tail})"

    def _set_state(self, state: str, why: str | None) -> None:
        if state != self.state:
            self.since = time.time()
        self.state, self.why = state, why
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _until(self, done: Callable[[], bool], timeout: float | None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        while not done():
            changed = self._changed
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)
        return True

    def _why(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        if not text.startswith(("Chroma server", "memory store")):
            text = f"{type(exc).__name__}: {text}"
        if self._token:  # an error text that echoes a header must not put the token in `status`
            text = text.replace(self._token, "***")
        return text[:300]

    def _drop_store(self, store: Store, *, abandon: bool) -> None:
        if self._store is store:
            self._store = None
        if abandon:
            store.abandon()
            self._abandoned.append(store)
        else:
            self._tasks = [t for t in self._tasks if not t.done()]
            self._tasks.append(asyncio.create_task(_close_quietly(store), name="memory-close"))

    async def _failed(self, store: Store, exc: BaseException) -> bool:
        """A store call failed: degrade (and drop the store) unless it still answers; True if degraded."""
        if store is not self._store:
            return True  # replaced meanwhile: the caller tries again on the current one
        if not isinstance(exc, StoreTimeout):
            try:
                await store.heartbeat()
                return False  # it answers: this one call was refused
            except Exception as probe:
                exc = probe if isinstance(probe, StoreTimeout) else exc
        self._degrade(store, exc)
        return True

    def _degrade(self, store: Store | None, exc: BaseException) -> None:
        if store is not None:
            if store is not self._store:
                return  # a store already replaced (a reload, an earlier failure) says nothing now
            self._drop_store(store, abandon=isinstance(exc, StoreTimeout))
        if self.state in (OK, OPENING):
            why = self._why(exc)
            log.warning("memory.degraded", why=why, spooled=len(self._spool))
            self._down_since = time.time()
            was_ok = self.state == OK
            self._set_state(DEGRADED, why)
            if was_ok:  # wake the connector (the connector's own failures need no wake-up)
                self._trouble.set()

    # -- the connector -----------------------------------------------------------------------
    async def _connect_loop(self) -> None:
        attempt_now = True  # the first open, and the first after a reload, do not wait
        while True:
            if self.state == OK:
                await self._trouble.wait()
                self._trouble.clear()
                attempt_now = self._retry_now
                continue
            if not attempt_now:
                delay = self._delay * random.uniform(0.8, 1.2)
                self._delay = min(self._delay * 2, self.cfg.retry_max_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._trouble.wait(), delay)  # a reload retries at once
                self._trouble.clear()
            attempt_now, self._retry_now = False, False
            # At most one memory thread stuck at a time: a store that hangs every call would
            # otherwise leave a thread behind per attempt. A server's stuck call ends by the HTTP
            # timeout; until then the memory stays degraded.
            self._abandoned = [s for s in self._abandoned if s.stuck()]
            if self._abandoned:
                self.why = "a memory store call is still stuck; waiting for it to return"
                continue
            try:
                store = await self._opener(self.cfg, self._token)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._degrade(None, exc)
                self.why = self._why(exc)  # the latest reason: the server may now refuse the token
                continue
            self._store = store
            if self._down_since is not None:
                log.info("memory.recovered", location=store.location, spooled=len(self._spool),
                         down_s=round(time.time() - self._down_since, 1))
            else:
                log.info("memory.opened", location=store.location, instance=self.who.instance,
                         spooled=len(self._spool))
            self._down_since = None
            self._set_state(OK, None)
            self._kick.set()

    def _proved(self) -> None:
        """A store call succeeded: the next outage starts its backoff from the shortest delay."""
        self._delay = self.cfg.retry_min_s

    # -- the writer --------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        while True:
            store = self._store
            if self.state != OK or store is None:
                await self._wait_kick(None)
                continue
            rows = await asyncio.to_thread(self._spool.head, BATCH_ITEMS)
            if not rows:
                self._flush_now = False
                self._notify()
                await self._wait_kick(None)
                continue
            if not self._flush_now and len(rows) < BATCH_ITEMS and all(r.kind in LAZY for r in rows):
                wait = rows[0].ts + BATCH_INTERVAL_S - time.time()
                # A lone observation (or use mark) waits briefly for company: one embedding call, one
                # commit, and not in the middle of the cycle that made it.
                if wait > 0:
                    await self._wait_kick(wait)
                    continue
            group = _leading_group(rows)
            try:
                await self._apply(store, group)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._write_failed(store, group, exc)
                continue
            await asyncio.to_thread(self._spool.ack, group)
            self._applied = group[-1].seq
            self._proved()
            self._notify()

    async def _wait_kick(self, timeout: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._kick.wait(), timeout)
        self._kick.clear()

    async def _apply(self, store: Store, group: list[Row]) -> None:
        kind = group[0].kind
        if kind in ("n0", "n1"):
            await store.add(Tier(kind), [(r.item_id, r.text, r.meta) for r in group])
        elif kind == "n2":
            (r,) = group
            lesson = await store.add_lesson(
                r.text, r.meta, success=bool(r.success), item_id=r.item_id, now=r.ts
            )
            self._lesson_ids[r.item_id] = lesson
        else:
            used: dict[str, float] = {}
            for r in group:
                used[r.item_id] = max(r.ts, used.get(r.item_id, 0.0))
            await store.mark_used(used)

    async def _write_failed(self, store: Store, group: list[Row], exc: Exception) -> None:
        if await self._failed(store, exc):
            return  # degraded: the rows stay spooled until the store is back
        head = group[0]
        attempts = await asyncio.to_thread(self._spool.failed, head)
        error = self._why(exc)
        if attempts < REFUSALS_BEFORE_DROP:
            log.warning("memory.write_refused", tier=head.kind, attempts=attempts, error=error)
            await asyncio.sleep(self.cfg.retry_min_s)
            return
        # The store answers but refuses this write every time: keep the rest flowing.
        await asyncio.to_thread(self._spool.drop, [head])
        self._dropped[head.kind] = self._dropped.get(head.kind, 0) + 1
        log.error("memory.write_dropped", tier=head.kind, attempts=attempts, error=error)

    # -- the Memory protocol -----------------------------------------------------------------
    async def _accept(
        self,
        kind: str,
        text: str,
        metadata: dict[str, Any],
        *,
        success: bool | None = None,
        item_id: str | None = None,
        now: float | None = None,
    ) -> tuple[str, int]:
        if self.state == CLOSED:
            raise MemoryUnavailable("memory is closed")
        now = time.time() if now is None else now
        item_id = item_id or uuid.uuid4().hex
        meta = clean_metadata(metadata, now) if kind != "used" else {}
        seq, dropped = await asyncio.to_thread(
            self._spool.append,
            kind,
            item_id,
            text,
            meta,
            success=success,
            ts=now,  # when it was accepted: the observation batching and a lesson's age count from it
        )
        if dropped:
            self._spool_full(dropped)
        if kind in ("n1", "n2"):
            self._last_rw = seq
        # The writer idles until there is something worth a write: a batch, or anything but observations.
        if kind != "n0" or self._spool.pending()["n0"] in (1, BATCH_ITEMS):
            self._kick.set()
        return item_id, seq

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
            await self._written(seq)
        return item_id

    async def add_lesson(
        self,
        text: str,
        metadata: dict[str, Any],
        *,
        success: bool,
        defer: bool = False,
        now: float | None = None,
    ) -> str:
        """Accept an N2 lesson; returns the lesson it became once written ("" if deferred or not yet)."""
        item_id, seq = await self._accept("n2", text, metadata, success=success, now=now)
        if defer or not await self._written(seq):
            return ""
        return self._lesson_ids.pop(item_id, "")

    async def _written(self, seq: int) -> bool:
        self._flush_now = True
        self._kick.set()
        return await self._until(lambda: self._applied >= seq or self.state != OK, self.cfg.timeout_s) and (
            self._applied >= seq
        )

    async def flush(self) -> None:
        """Write everything spooled now, if the store is there (a spooled write is durable anyway)."""
        if self.state != OK:
            return
        tail = await asyncio.to_thread(self._spool.last_seq, KINDS)
        if tail > self._applied:
            await self._written_all(tail)

    async def _written_all(self, tail: int) -> None:
        self._flush_now = True
        self._kick.set()
        await self._until(lambda: self._applied >= tail or self.state != OK, None)

    async def recall(
        self, query: str, *, budget_tokens: int, k: int = 8, now: float | None = None
    ) -> list[Recalled]:
        """The best memories for a query; nothing (at once) while the store is not there."""
        if self.state != OK:
            return []
        # Read your own writes: the last cycle's episode and lesson are in the store first.
        pending = self._last_rw
        if pending > self._applied:
            self._flush_now = True
            self._kick.set()
            await self._until(lambda: self._applied >= pending or self.state != OK, self.cfg.timeout_s)
        store = self._store
        if self.state != OK or store is None:
            return []
        now = time.time() if now is None else now
        try:
            hits = await store.recall(query, budget_tokens=budget_tokens, k=k, now=now)
        except Exception as exc:
            if await self._failed(store, exc):
                return []
            raise
        self._proved()
        # Marks for our own lessons (another daemon's are theirs to age), spooled in one go.
        marks = [h.id for h in hits if h.tier is Tier.N2 and not h.metadata.get("foreign")]
        if marks and self.state != CLOSED:
            dropped = await asyncio.to_thread(self._spool.append_marks, marks, now)
            if dropped:
                self._spool_full(dropped)
            self._kick.set()
        return hits

    # -- operators ---------------------------------------------------------------------------
    def _require(self) -> Store:
        store = self._store
        if self.state != OK or store is None:
            raise MemoryUnavailable(f"memory is {self.summary()}")
        return store

    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]:
        await self.flush()
        store = self._require()
        try:
            return await store.search(query, tier=tier, k=k)
        except Exception as exc:
            if await self._failed(store, exc):
                raise MemoryUnavailable(f"memory is {self.summary()}") from None
            raise

    async def prune(self, *, dry_run: bool = False, scheduled: bool = False) -> dict[str, int]:
        """Apply retention; a scheduled prune first waits this instance's share of prune_spread_s."""
        if scheduled:
            delay = self.who.share(self.cfg.prune_spread_s)
            log.info("memory.prune_scheduled", in_s=delay)
            await asyncio.sleep(delay)
        store = self._require()
        try:
            return await store.prune(dry_run=dry_run)
        except Exception as exc:
            if await self._failed(store, exc):
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
                await self._failed(store, exc)
        if figures is None:
            figures = await asyncio.to_thread(self._ledger_stats)
        figures.update(self.status(), memory=self.summary())
        return figures

    def _ledger_stats(self) -> dict[str, Any]:
        from autod.memory.chroma import TIERS, collection_names

        tally, pending, dropped = self._spool.tally(), self._spool.pending(), self._spool.dropped()
        names = collection_names(self.cfg.collection_prefix)
        tiers = {
            t.value: {
                "collection": names[t],
                "count": None,
                "own": tally.get(t.value, {}).get("own", 0),
                "oldest_ts": tally.get(t.value, {}).get("oldest_ts"),
                "newest_ts": tally.get(t.value, {}).get("newest_ts"),
                "spooled": pending.get(t.value, 0),
                "dropped": dropped.get(t.value, 0),
            }
            for t in TIERS
        }
        return {
            "mode": "server" if self.cfg.url else "embedded",
            "tiers": tiers,
            "pending_observations": pending.get("n0", 0),
            "dropped_observations": dropped.get("n0", 0),
            "disk_bytes": None,
        }


def _leading_group(rows: list[Row]) -> list[Row]:
    """The longest run of same-kind rows at the head that one store call can take."""
    kind = rows[0].kind
    limit = {"n0": BATCH_ITEMS, "n1": EPISODES_PER_WRITE, "n2": 1}.get(kind, len(rows))
    group: list[Row] = []
    for r in rows:
        if r.kind != kind or len(group) >= limit:
            break
        group.append(r)
    return group


async def _close_quietly(store: Store) -> None:
    with contextlib.suppress(Exception):
        await store.close()


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
