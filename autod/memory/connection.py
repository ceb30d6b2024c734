"""The daemon's link to its memory store: open it in the background, know its health (opening,
ok, degraded: why and since when), turn a failed or overdue call into degradation, and reconnect
with backoff and jitter. At most one memory thread may be stuck at a time.

The store behind it is anything satisfying ``Store`` (ChromaMemory in production; tests script
outages at this seam).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from autod import logs
from autod.backoff import Backoff
from autod.config.settings import MemoryConfig
from autod.memory import Recalled, Tier
from autod.memory.worker import StoreTimeout

log = structlog.get_logger("autod.memory")

OPENING, OK, DEGRADED, CLOSED = "opening", "ok", "degraded", "closed"
# What changes the connection; anything else in memory: applies to the open store at once.
CONNECTION_KEYS = ("url", "tenant", "database", "collection_prefix", "auth_header", "timeout_s", "embedder",
                   "embed_url", "embed_model", "auth_token", "auth_token_file")


class MemoryUnavailable(RuntimeError):
    """An operator command (search, prune) needs the store and it is not there; says why."""


class Store(Protocol):
    """What the daemon's memory needs from a store (ChromaMemory)."""

    cfg: MemoryConfig
    location: str

    async def add(self, tier: Tier, items: list[tuple[str, str, dict[str, Any]]], *,
                  now: float | None = None) -> None: ...
    async def add_lesson(self, text: str, metadata: dict[str, Any], *, success: bool, item_id: str,
                         now: float | None = None) -> str: ...
    async def mark_used(self, used: dict[str, float]) -> None: ...
    async def heartbeat(self) -> None: ...
    async def recall(self, query: str, *, budget_tokens: int, k: int = 8,
                     now: float | None = None) -> list[Recalled]: ...
    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]: ...
    async def prune(self, *, dry_run: bool = False, now: float | None = None) -> dict[str, int]: ...
    async def stats(self) -> dict[str, Any]: ...
    def warm(self) -> None: ...
    async def close(self) -> None: ...
    def abandon(self) -> None: ...
    def stuck(self) -> bool: ...


Opener = Callable[[MemoryConfig, "str | None"], Awaitable[Store]]


class StoreConnection:
    """The current store (or none), its health, and the connector task that (re)opens it."""

    def __init__(self, cfg: MemoryConfig, opener: Opener, *, token: str | None,
                 spooled: Callable[[], int], on_open: Callable[[], None]) -> None:
        self.cfg = cfg
        self.store: Store | None = None
        self.state, self.why, self.since = OPENING, "opening the store", time.time()
        self._opener = opener
        self._token = token
        self._spooled = spooled  # for the log lines: what waits for the store
        self._on_open = on_open
        self._trouble = asyncio.Event()  # wakes the connector
        self._changed = asyncio.Event()  # replaced on every change; waiters hold the old one
        self._failures = 0  # opens failed since the store last answered: the backoff's attempt
        self._retry_now = False
        self._abandoned: list[Store] = []  # stores given up on while a call of theirs was stuck
        self._closing: list[asyncio.Task[None]] = []
        self._down_since: float | None = None

    # -- health ------------------------------------------------------------------------------
    def set_state(self, state: str, why: str | None) -> None:
        if state != self.state:
            self.since = time.time()
        self.state, self.why = state, why
        self.notify()

    def notify(self) -> None:
        """Something changed (a state, a write landed): wake everyone in ``until``."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def until(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until done() holds (re-checked at every change), at most timeout; returns done()."""
        end = None if timeout is None else time.monotonic() + timeout
        while not done():
            changed = self._changed
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)
        return True

    def why_of(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        if not text.startswith(("Chroma server", "memory store")):
            text = f"{type(exc).__name__}: {text}"
        if self._token:  # an error text that echoes a header must not put the token in `status`
            text = text.replace(self._token, "***")
        return text[:300]

    def require(self, describe: Callable[[], str]) -> Store:
        store = self.store
        if self.state != OK or store is None:
            raise MemoryUnavailable(f"memory is {describe()}")
        return store

    # -- failures ------------------------------------------------------------------------------
    async def failed(self, store: Store, exc: BaseException) -> bool:
        """A store call failed: degrade (and drop the store) unless it still answers; True if degraded."""
        if store is not self.store:
            return True  # replaced meanwhile: the caller tries again on the current one
        if not isinstance(exc, StoreTimeout):
            try:
                await store.heartbeat()
                return False  # it answers: this one call was refused
            except Exception as probe:
                exc = probe if isinstance(probe, StoreTimeout) else exc
        self.degrade(store, exc)
        return True

    def degrade(self, store: Store | None, exc: BaseException) -> None:
        if store is not None:
            if store is not self.store:
                return  # a store already replaced (a reload, an earlier failure) says nothing now
            self._drop(store, abandon=isinstance(exc, StoreTimeout))
        if self.state in (OK, OPENING):
            why = self.why_of(exc)
            log.warning("memory.degraded", why=why, spooled=self._spooled())
            self._down_since = time.time()
            was_ok = self.state == OK
            self.set_state(DEGRADED, why)
            if was_ok:  # wake the connector (its own failures need no wake-up)
                self._trouble.set()

    def proved(self) -> None:
        """A store call succeeded: the next outage starts its backoff from the shortest delay."""
        self._failures = 0

    def _drop(self, store: Store, *, abandon: bool) -> None:
        if self.store is store:
            self.store = None
        if abandon:
            store.abandon()
            self._abandoned.append(store)
        else:
            self._closing = [t for t in self._closing if not t.done()]
            self._closing.append(asyncio.create_task(_close_quietly(store), name="memory-close"))

    # -- the connector -----------------------------------------------------------------------
    async def run(self) -> None:
        """Open the store now, and again (with backoff) whenever it is lost; runs until cancelled."""
        attempt_now = True  # the first open, and the first after a reload, do not wait
        while True:
            if self.state == OK:
                await self._trouble.wait()
                self._trouble.clear()
                attempt_now = self._retry_now
                continue
            if not attempt_now:
                delay = Backoff(self.cfg.retry_min_s, self.cfg.retry_max_s, (0.8, 1.2)).delay(self._failures)
                self._failures += 1
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
                self.degrade(None, exc)
                self.why = self.why_of(exc)  # the latest reason: the server may now refuse the token
                continue
            self.store = store
            if self._down_since is not None:
                log.info("memory.recovered", location=store.location, spooled=self._spooled(),
                         down_s=round(time.time() - self._down_since, 1))
            else:
                log.info("memory.opened", location=store.location, spooled=self._spooled())
            self._down_since = None
            self.set_state(OK, None)
            self._on_open()

    def reload(self, cfg: MemoryConfig, *, token: str | None) -> None:
        """A new config (SIGHUP): retry a degraded store now; reconnect if the connection changed."""
        old, self.cfg = self.cfg, cfg
        store = self.store
        if any(getattr(old, k) != getattr(cfg, k) for k in CONNECTION_KEYS) or token != self._token:
            self._token = token
            if store is not None:
                self._drop(store, abandon=False)
            self.set_state(OPENING, "reconnecting after a config reload")
        elif store is not None:
            store.cfg = cfg  # retention, trust and prune scope apply from the next call
        self._failures = 0
        self._retry_now = True
        self._trouble.set()

    async def close(self) -> None:
        """Close the store (bounded by its own deadline) and wait for earlier closes."""
        store, self.store = self.store, None
        if store is not None:
            await _close_quietly(store)
        for task in self._closing:
            with contextlib.suppress(asyncio.CancelledError), logs.survive("memory.close_failed"):
                await task
        self.set_state(CLOSED, None)


async def _close_quietly(store: Store) -> None:
    """Close a store already given up on: its trouble was logged when it was dropped, this adds one line."""
    with logs.survive("memory.close_failed"):
        await store.close()
