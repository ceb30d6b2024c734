"""The tiered store over chromadb: one cosine collection per tier (``<prefix>n0``, ``n1``, ``n2``).

Embedded under ``<state_dir>/memory`` with exactly one owner process (see lock.py), or in a
Chroma server shared by several daemons when ``memory.url`` is set. Each call is one job on the
memory thread (worker.py) under ``memory.timeout_s``; nothing here queues, retries or degrades:
that is ResilientMemory (resilient.py), which the daemon uses. The CLI uses this class directly
while no daemon runs.

Every item records the daemon that wrote it (``instance``, ``workspace``). In a shared store a
daemon's observations and episodes are in collections of its own and its lessons in the shared
one (chroma.collection_names); it writes, merges into, marks and (by default) prunes only its own
items; recall sees its own items and, as ``memory.recall_from_others`` allows, other daemons'
lessons, labelled as theirs, never their observations or episodes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from autod.config.settings import MemoryConfig
from autod.memory import Embedder, Recalled, Tier, lessons
from autod.memory.chroma import (
    TIERS,
    Connection,
    StoreUnavailable,
    clean_metadata,
    connect,
    open_collections,
    other_daemons_collections,
)
from autod.memory.figures import Figures
from autod.memory.identity import Identity, identity
from autod.memory.lock import MemoryLocked, OwnerLock
from autod.memory.recall import Hit, pack, rank, similarity_from_distance
from autod.memory.retention import Target, lesson_usefulness, prune
from autod.memory.spool import FILE_NAME, Spool
from autod.memory.worker import StoreTimeout, Worker

__all__ = [
    "ChromaMemory",
    "Item",
    "MemoryLocked",
    "MemoryReadOnly",
    "StoreTimeout",
    "StoreUnavailable",
    "clean_metadata",
    "lesson_usefulness",
]

log = structlog.get_logger("autod.memory")
T = TypeVar("T")
Item = tuple[str, str, dict[str, Any]]  # (id, text, metadata)



class MemoryReadOnly(RuntimeError):
    """The store was opened read-only (a CLI look while no daemon runs)."""


def open_deadline(cfg: MemoryConfig) -> float:
    # Opening makes several calls (probe, tenant check, three collections), each bounded by
    # timeout_s in the HTTP client; an embedded store may load a large index from disk.
    return 4 * cfg.timeout_s + 30


class ChromaMemory(Figures):
    """The raw store: writes, lessons (polarity-aware merge), recall, search, prune, stats."""

    def __init__(
        self,
        cfg: MemoryConfig,
        conn: Connection,
        cols: dict[Tier, Any],
        embedder: Embedder,
        worker: Worker,
        *,
        who: Identity,
        lock: OwnerLock | None,
        read_only: bool,
        spool: Spool | None,
        owns_spool: bool,
    ) -> None:
        self.cfg = cfg
        self._conn = conn
        self._client = conn.client
        self._cols = cols
        self._embedder = embedder
        self._worker = worker
        self.who = who
        self._lock = lock
        self.read_only = read_only
        self.spool = spool
        self._owns_spool = owns_spool
        self.location = conn.location
        self.server = cfg.url is not None
        self._closed = False

    # -- opening -----------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        cfg: MemoryConfig,
        state_dir: Path,
        *,
        embedder: Embedder | None = None,
        read_only: bool = False,
        who: Identity | None = None,
        token: str | None = None,
        spool: Spool | None = None,
    ) -> ChromaMemory:
        """Open the embedded store under state_dir (taking the owner lock) or the configured server."""
        worker = Worker()
        lock: OwnerLock | None = None
        owns_spool = False
        try:
            if not cfg.url:
                lock = OwnerLock(Path(state_dir) / "memory")
                lock.acquire()
            conn = await worker.run(
                connect,
                cfg,
                Path(state_dir),
                token=token,
                timeout_s=cfg.timeout_s,
                timeout=open_deadline(cfg),
            )
            if who is None:
                who = await asyncio.to_thread(identity, state_dir, "")
            instance = who.instance if cfg.url else None  # a shared store: n0 and n1 of our own
            cols = await worker.run(
                open_collections, conn.client, cfg.collection_prefix, instance, timeout=open_deadline(cfg)
            )
            if embedder is None:
                from autod.memory.embed import make_embedder

                embedder = make_embedder(cfg)
            if spool is None:
                owns_spool = True
                spool = (
                    await asyncio.to_thread(Spool.existing, Path(state_dir))
                    if read_only
                    else await asyncio.to_thread(Spool, Path(state_dir) / FILE_NAME, cfg.spool_max_items)
                )
        except BaseException:
            if lock is not None:
                lock.release()
            worker.abandon()
            raise
        return cls(
            cfg,
            conn,
            cols,
            embedder,
            worker,
            who=who,
            lock=lock,
            read_only=read_only,
            spool=spool,
            owns_spool=owns_spool,
        )

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise StoreUnavailable("memory store is closed")
        return await self._worker.run(fn, *args, timeout=self.cfg.timeout_s, **kwargs)

    def warm(self) -> None:
        """Load the embedder now when it loads lazily (the local model); blocking."""
        self._embedder.load()

    def _writable(self) -> None:
        if self.read_only:
            raise MemoryReadOnly(f"memory store {self.location} is open read-only")

    # -- whose items ---------------------------------------------------------------------
    @property
    def own(self) -> dict[str, Any] | None:
        """The filter for this daemon's lessons; None in the embedded store, which is all its own.

        Observations and episodes need none: in a shared store they live in this daemon's own
        collections (chroma.collection_names).
        """
        return {"instance": self.who.instance} if self.server else None

    def _where(self, tier: Tier, *, everyone: bool) -> dict[str, Any] | None:
        return None if tier is not Tier.N2 or everyone else self.own

    def _recall_where(self, tier: Tier) -> dict[str, Any] | None:
        # A filter costs a scan of the collection: "none" pays it, the default does not.
        return self._where(tier, everyone=self.cfg.recall_from_others == "lessons")

    # -- writing -----------------------------------------------------------------------
    async def add(self, tier: Tier, items: list[Item], *, now: float | None = None) -> None:
        """Store observations (N0) or episodes (N1) under their given ids (a replay overwrites itself)."""
        self._writable()
        await self._run(self._add_sync, tier, items, time.time() if now is None else now)

    def _add_sync(self, tier: Tier, items: list[Item], now: float) -> None:
        if not items:
            return
        vectors = self._embedder.embed([text for _, text, _ in items])
        metas = [{**clean_metadata(meta, now), **self.who.stamp()} for _, _, meta in items]
        # upsert: a batch whose write timed out here but landed there is written again, not doubled
        self._cols[tier].upsert(
            ids=[i for i, _, _ in items],
            embeddings=vectors,
            documents=[t for _, t, _ in items],
            metadatas=metas,
        )
        if self.spool is not None:
            stamps = [float(m["ts"]) for m in metas]
            self.spool.tally_added(tier.value, len(items), min(stamps), max(stamps))

    async def add_lesson(
        self, text: str, metadata: dict[str, Any], *, success: bool, item_id: str, now: float | None = None
    ) -> str:
        """Store an N2 lesson, or merge it into a near-duplicate of the same polarity; returns its id.

        A lesson keeps its sign: a failure or a rejection never merges into a success lesson (nor
        the reverse), so a success's text and counters are never overwritten by a "do not do this".
        """
        self._writable()
        now = time.time() if now is None else now
        return await self._run(
            lessons.add_lesson, self._cols[Tier.N2], self._embedder, self.who, self.own, item_id=item_id,
            text=text, meta=clean_metadata(metadata, now), success=success, now=now, spool=self.spool,
        )

    async def mark_used(self, used: dict[str, float]) -> None:
        """Record when this daemon's lessons were last recalled (others' lessons are theirs to age)."""
        self._writable()
        if used:
            await self._run(lessons.mark_used, self._cols[Tier.N2], self.who, shared=self.server, used=used)

    # -- reading -----------------------------------------------------------------------
    async def heartbeat(self) -> None:
        """One cheap round trip to the store (raises when it is away)."""
        await self._run(self._cols[Tier.N2].count)

    async def recall(
        self, query: str, *, budget_tokens: int, k: int = 8, now: float | None = None
    ) -> list[Recalled]:
        """The best memories for a query across all tiers, ranked and packed into the token budget."""
        now = time.time() if now is None else now
        return await self._run(self._recall_sync, query, budget_tokens, k, now)

    def _recall_sync(self, query: str, budget_tokens: int, k: int, now: float) -> list[Recalled]:
        if k <= 0 or budget_tokens <= 0:
            return []
        vector = self._embedder.embed([query])[0]
        hits: list[Hit] = []
        for tier in TIERS:
            # Over-fetch: weights and decay re-order what plain similarity returned.
            hits.extend(self._query(tier, vector, 2 * k, self._recall_where(tier)))
        return pack(rank(hits, now, min_similarity=self.cfg.min_similarity), budget_tokens, k)

    def _query(self, tier: Tier, vector: list[float], n: int, where: dict[str, Any] | None) -> list[Hit]:
        res = self._cols[tier].query(
            query_embeddings=[vector],
            n_results=n,
            where=where,
            include=["documents", "metadatas", "distances"],
        )
        hits = []
        for i, doc, m, d in zip(
            res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0], strict=True
        ):
            meta, text = dict(m or {}), doc or ""
            if self.server and meta.get("instance") != self.who.instance:
                # Another daemon's item reaches a prompt only labelled as such.
                meta["foreign"] = True
                where_from = Path(str(meta.get("workspace") or "")).name or "unknown workspace"
                text = f"[shared by another autod ({where_from})] {text}"
            hits.append(
                Hit(id=i, tier=tier, text=text, similarity=similarity_from_distance(d), metadata=meta)
            )
        return hits

    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]:
        """Plain similarity search (score = cosine similarity) over what recall may see."""
        return await self._run(self._search_sync, query, tier, k)

    def _search_sync(self, query: str, tier: Tier | None, k: int) -> list[Recalled]:
        vector = self._embedder.embed([query])[0]
        hits = [
            h
            for t in ([tier] if tier else list(TIERS))
            for h in self._query(t, vector, k, self._recall_where(t))
        ]
        hits.sort(key=lambda h: -h.similarity)
        return [Recalled(h.id, h.tier, h.text, h.similarity, dict(h.metadata)) for h in hits[:k]]

    # -- retention (the figures: autod.memory.figures) ---------------------------------
    async def prune(self, *, dry_run: bool = False, now: float | None = None) -> dict[str, int]:
        """Apply each tier's TTL, then its max_items, in short jobs; returns how many went (or would go).

        ``prune_scope: all`` in a shared store also prunes other daemons' lessons and their own
        observation and episode collections, with this daemon's retention (the fleet's janitor).
        """
        if not dry_run:
            self._writable()
        everyone = self.cfg.prune_scope == "all"
        targets = [Target(t, self._cols[t], self._where(t, everyone=everyone), self._where(t, everyone=False))
                   for t in TIERS]
        if self.server and everyone:
            others = await self._run(other_daemons_collections, self._client, self.cfg.collection_prefix,
                                     self.who.instance)
            targets += [Target(tier, col, None, None, mine=False) for tier, col in others]
        return await prune(self._run_job, targets, self.cfg, dry_run=dry_run,
                           now=time.time() if now is None else now,
                           spool=None if self.read_only else self.spool)

    async def _run_job(self, fn: Callable[[], T]) -> T:
        return await self._run(fn)

    # -- shutdown ----------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the memory thread (within the deadline) and release the owner lock."""
        if self._closed:
            return
        try:
            # after what is queued; closing the client releases its sqlite files or HTTP connections
            await self._worker.run(self._client.close, timeout=self.cfg.timeout_s)
        except StoreTimeout:
            log.warning("memory.close_abandoned", why="the memory thread did not finish in time")
        finally:
            self._release()

    def abandon(self) -> None:
        """Leave a stuck memory thread behind; the next connection gets a new one."""
        self._worker.abandon()
        if self.server:  # close the HTTP client from a side thread: it may end the stuck request too
            threading.Thread(target=self._client.close, name="autod-memory-close", daemon=True).start()
        self._release()

    def stuck(self) -> bool:
        """Abandoned with a job still running on its thread."""
        return self._worker.abandoned and self._worker.alive

    def _release(self) -> None:
        self._closed = True
        self._worker.shutdown(wait=False)
        if self._owns_spool and self.spool is not None:
            self.spool.close()
        if self._lock is not None:
            self._lock.release()

