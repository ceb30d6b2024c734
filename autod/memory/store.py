"""Tiered memory over chromadb: one cosine collection per tier (mem_n0, mem_n1, mem_n2).

Embedded under ``<state_dir>/memory`` with exactly one owner process (see lock.py), or in a
Chroma server shared by several daemons when ``memory.url`` is set. Every chromadb and embedding
call runs on one worker thread: chromadb's embedded client is not meant for concurrent writers,
and a single thread also makes lesson de-duplication (query, then update) atomic in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import structlog

from autod.config import MemoryConfig, Retention
from autod.memory import Embedder, Recalled, Tier
from autod.memory.lock import MemoryLocked, OwnerLock
from autod.memory.recall import Hit, pack, rank, similarity_from_distance
from autod.threads import named_pool

__all__ = ["ChromaMemory", "MemoryLocked", "MemoryReadOnly", "lesson_usefulness"]

log = structlog.get_logger("autod.memory")
T = TypeVar("T")

COLLECTIONS: dict[Tier, str] = {Tier.N0: "mem_n0", Tier.N1: "mem_n1", Tier.N2: "mem_n2"}
DEDUPE_SIMILARITY = 0.92
BATCH_ITEMS = 64
BATCH_INTERVAL_S = 0.5
MAX_PENDING = 10_000  # observations waiting for the batcher; beyond this the oldest are dropped
PAGE = 2000  # rows per chromadb get/delete call


class MemoryReadOnly(RuntimeError):
    """The store was opened read-only (a CLI look while no daemon runs)."""


def clean_metadata(metadata: Mapping[str, Any], now: float) -> dict[str, str | int | float | bool]:
    """Metadata chromadb accepts: scalars kept, None dropped, the rest as JSON; ``ts`` as epoch float."""
    out: dict[str, str | int | float | bool] = {}
    for key, value in metadata.items():
        if value is None:
            continue
        if isinstance(value, str | int | float | bool):
            out[str(key)] = value
        elif isinstance(value, datetime):
            out[str(key)] = value.timestamp()
        else:
            out[str(key)] = json.dumps(value, default=str, sort_keys=True)
    ts = out.get("ts")
    if isinstance(ts, str):  # chromadb cannot compare strings in filters: store epoch seconds
        try:
            ts = datetime.fromisoformat(ts).timestamp()
        except ValueError:
            ts = None
    out["ts"] = float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else now
    return out


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


def _age_key(tier: Tier) -> str:
    # A lesson recalled yesterday is alive however old it is: N2 ages by last use.
    return "last_used" if tier is Tier.N2 else "ts"


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class ChromaMemory:
    """The Memory protocol over chromadb, plus search, prune and stats for operators."""

    def __init__(
        self,
        cfg: MemoryConfig,
        client: Any,
        collections: dict[Tier, Any],
        embedder: Embedder,
        executor: ThreadPoolExecutor,
        *,
        lock: OwnerLock | None,
        read_only: bool,
        location: str,
        disk_path: Path | None,
    ) -> None:
        self.cfg = cfg
        self._client = client
        self._cols = collections
        self._embedder = embedder
        self._executor = executor
        self._lock = lock
        self.read_only = read_only
        self.location = location
        self._disk_path = disk_path
        self._pending: list[tuple[str, str, dict[str, Any]]] = []
        self._dropped = 0
        self._used: dict[str, float] = {}  # lesson id -> last recalled; written by the batcher
        self._deferred: list[Callable[[], Any]] = []  # episode/lesson writes queued by defer=True
        self._wake = asyncio.Event()  # something is queued
        self._full = asyncio.Event()  # a whole batch is queued: write now
        self._drain_lock = asyncio.Lock()
        self._closed = False
        self._batcher: asyncio.Task[None] | None = None
        if not read_only:
            self._batcher = asyncio.create_task(self._batch_loop(), name="memory-batcher")

    # -- opening -----------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        cfg: MemoryConfig,
        state_dir: Path,
        *,
        embedder: Embedder | None = None,
        read_only: bool = False,
    ) -> ChromaMemory:
        """Open the embedded store under state_dir (taking the owner lock) or the configured server."""
        executor = named_pool("autod-memory", 1)
        loop = asyncio.get_running_loop()
        lock: OwnerLock | None = None
        try:
            if cfg.url:
                client, location, disk_path = await loop.run_in_executor(executor, _http_client, cfg.url)
            else:
                disk_path = Path(state_dir) / "memory"
                lock = OwnerLock(disk_path)
                lock.acquire()
                client = await loop.run_in_executor(executor, _persistent_client, disk_path)
                location = str(disk_path)
            cols = await loop.run_in_executor(executor, _collections, client)
            if embedder is None:
                from autod.memory.embed import make_embedder

                embedder = make_embedder(cfg)
        except BaseException:
            if lock is not None:
                lock.release()
            executor.shutdown(wait=False)
            raise
        return cls(cfg, client, cols, embedder, executor, lock=lock, read_only=read_only,
                   location=location, disk_path=disk_path if not cfg.url else None)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, partial(fn, *args, **kwargs))

    def _writable(self) -> None:
        if self.read_only:
            raise MemoryReadOnly(f"memory store {self.location} is open read-only")
        if self._closed:
            raise RuntimeError("memory store is closed")

    # -- writing -----------------------------------------------------------------------
    async def observe(self, text: str, metadata: dict[str, Any]) -> str:
        """Queue an N0 observation; the batcher embeds and writes it within ~0.5 s. Never blocks."""
        self._writable()
        item_id = uuid.uuid4().hex
        self._pending.append((item_id, text, clean_metadata(metadata, time.time())))
        if len(self._pending) > MAX_PENDING:
            excess = len(self._pending) - MAX_PENDING
            del self._pending[:excess]
            self._dropped += excess
            log.warning("memory_observations_dropped", dropped=excess, reason="backlog full")
        self._wake.set()
        if len(self._pending) >= BATCH_ITEMS:
            self._full.set()
        return item_id

    async def add_episode(self, text: str, metadata: dict[str, Any], *, defer: bool = False) -> str:
        """Store an N1 episode (a plan with its outcome); returns its id.

        defer=True queues the write for the background writer (the next recall or flush waits for it),
        so a cycle's reflect phase does not wait for an embedding and a chromadb commit.
        """
        self._writable()
        item_id = uuid.uuid4().hex
        items = [(item_id, text, clean_metadata(metadata, time.time()))]
        if defer:
            self._defer(partial(self._add_sync, Tier.N1, items))
        else:
            await self._run(self._add_sync, Tier.N1, items)
        return item_id

    async def add_lesson(
        self, text: str, metadata: dict[str, Any], *, success: bool, now: float | None = None,
        defer: bool = False,
    ) -> str:
        """Store an N2 lesson, or merge it into a near-duplicate (uses/successes counted); returns its id.

        With defer=True the write is queued (see add_episode) and "" is returned: which lesson it
        merges into is only known when it is written.
        """
        self._writable()
        now = time.time() if now is None else now
        job = partial(self._add_lesson_sync, text, clean_metadata(metadata, now), success, now)
        if defer:
            self._defer(job)
            return ""
        return await self._run(job)

    def _defer(self, job: Callable[[], Any]) -> None:
        self._deferred.append(job)
        self._wake.set()
        self._full.set()  # episodes and lessons are few: write them without the batching wait

    def _add_sync(self, tier: Tier, items: list[tuple[str, str, dict[str, Any]]]) -> None:
        vectors = self._embedder.embed([text for _, text, _ in items])
        self._cols[tier].add(
            ids=[i for i, _, _ in items],
            embeddings=vectors,
            documents=[t for _, t, _ in items],
            metadatas=[m for _, _, m in items],
        )

    def _add_lesson_sync(self, text: str, meta: dict[str, Any], success: bool, now: float) -> str:
        col = self._cols[Tier.N2]
        vector = self._embedder.embed([text])[0]
        match = self._near_duplicate(col, vector, meta.get("fingerprint"))
        meta = {**meta, "ts": now, "last_used": now}
        if match is not None:
            lesson_id, old = match
            merged = {**old, **meta}
            merged["uses"] = int(old.get("uses", 0)) + 1
            merged["successes"] = int(old.get("successes", 0)) + int(success)
            col.update(ids=[lesson_id], embeddings=[vector], documents=[text], metadatas=[merged])
            return lesson_id
        lesson_id = uuid.uuid4().hex
        meta.update(uses=1, successes=int(success))
        col.add(ids=[lesson_id], embeddings=[vector], documents=[text], metadatas=[meta])
        return lesson_id

    @staticmethod
    def _near_duplicate(col: Any, vector: list[float], fingerprint: Any) -> tuple[str, dict[str, Any]] | None:
        if col.count() == 0:
            return None
        res = col.query(query_embeddings=[vector], n_results=5, include=["metadatas", "distances"])
        close = [
            (i, m or {}, similarity_from_distance(d))
            for i, m, d in zip(res["ids"][0], res["metadatas"][0], res["distances"][0], strict=True)
            if similarity_from_distance(d) >= DEDUPE_SIMILARITY
        ]
        if not close:
            return None
        # Same fingerprint first (the same failure), then the closest text.
        same = fingerprint is not None
        best = max(close, key=lambda c: (same and c[1].get("fingerprint") == fingerprint, c[2]))
        return best[0], dict(best[1])

    # -- observation batching ----------------------------------------------------------
    async def _batch_loop(self) -> None:
        while not self._closed:
            if not self._pending and not self._used and not self._deferred:
                await self._wake.wait()  # idle: nothing to write, no timer (observe/recall/close wake it)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), timeout=BATCH_INTERVAL_S)
            self._wake.clear()
            self._full.clear()
            try:
                await self._drain()
            except Exception as exc:  # a failed batch must not kill the batcher
                log.error("memory_batch_failed", error=f"{type(exc).__name__}: {exc}")

    async def _drain(self) -> None:
        async with self._drain_lock:
            while self._deferred:
                job = self._deferred.pop(0)
                try:
                    await self._run(job)
                except Exception as exc:  # one bad write must not block the others
                    log.error("memory_write_failed", error=f"{type(exc).__name__}: {exc}")
            while self._pending:
                batch = self._pending[:BATCH_ITEMS]
                del self._pending[:BATCH_ITEMS]
                try:
                    await self._run(self._add_sync, Tier.N0, batch)
                except Exception:
                    self._dropped += len(batch)
                    raise
            if self._used:
                used, self._used = self._used, {}
                await self._run(self._mark_used_sync, used)

    def _mark_used_sync(self, used: dict[str, float]) -> None:
        col = self._cols[Tier.N2]
        # A lesson pruned (or removed by another daemon) since it was recalled is simply gone.
        alive = set(col.get(ids=list(used), include=[])["ids"])
        ids = [i for i in used if i in alive]
        if ids:
            col.update(ids=ids, metadatas=[{"last_used": used[i]} for i in ids])

    async def flush(self) -> None:
        """Write every queued observation (and lesson-use mark) now."""
        if not self.read_only:
            await self._drain()

    # -- reading -----------------------------------------------------------------------
    async def recall(
        self, query: str, *, budget_tokens: int, k: int = 8, now: float | None = None
    ) -> list[Recalled]:
        """The best memories for a query across all tiers, ranked and packed into the token budget."""
        now = time.time() if now is None else now
        if self._deferred:  # read your own writes: the last cycle's lesson must be recallable
            await self._drain()
        kept = await self._run(self._recall_sync, query, budget_tokens, k, now)
        if not self.read_only and not self._closed:
            # Marking lessons used is a write (~10 ms of sqlite commit): the batcher does it
            # off the recall path, and flush() or close() makes it durable.
            self._used.update((r.id, now) for r in kept if r.tier is Tier.N2)
            if self._used:
                self._wake.set()
        return kept

    def _recall_sync(self, query: str, budget_tokens: int, k: int, now: float) -> list[Recalled]:
        if k <= 0 or budget_tokens <= 0:
            return []
        vector = self._embedder.embed([query])[0]
        hits: list[Hit] = []
        for tier in Tier:
            # Over-fetch: weights and decay re-order what plain similarity returned.
            hits.extend(self._query(tier, vector, 2 * k))
        return pack(rank(hits, now, min_similarity=self.cfg.min_similarity), budget_tokens, k)

    def _query(self, tier: Tier, vector: list[float], n: int) -> list[Hit]:
        res = self._cols[tier].query(
            query_embeddings=[vector], n_results=n, include=["documents", "metadatas", "distances"]
        )
        return [
            Hit(id=i, tier=tier, text=doc or "", similarity=similarity_from_distance(d), metadata=m or {})
            for i, doc, m, d in zip(
                res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0], strict=True
            )
        ]

    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]:
        """Plain similarity search (score = cosine similarity), in one tier or all of them."""
        if self._deferred:
            await self._drain()
        return await self._run(self._search_sync, query, tier, k)

    def _search_sync(self, query: str, tier: Tier | None, k: int) -> list[Recalled]:
        vector = self._embedder.embed([query])[0]
        hits = [h for t in ([tier] if tier else list(Tier)) for h in self._query(t, vector, k)]
        hits.sort(key=lambda h: -h.similarity)
        return [Recalled(h.id, h.tier, h.text, h.similarity, dict(h.metadata)) for h in hits[:k]]

    # -- retention ---------------------------------------------------------------------
    async def prune(self, *, dry_run: bool = False, now: float | None = None) -> dict[str, int]:
        """Apply each tier's TTL, then its max_items; returns how many items per tier went (or would go)."""
        if not dry_run:
            self._writable()
            await self.flush()
        now = time.time() if now is None else now
        return await self._run(self._prune_sync, dry_run, now)

    def _prune_sync(self, dry_run: bool, now: float) -> dict[str, int]:
        removed: dict[str, int] = {}
        for tier in Tier:
            retention: Retention = getattr(self.cfg, tier.value)
            col = self._cols[tier]
            rows = _all_metadatas(col)
            doomed: list[str] = []
            if retention.ttl_days is not None:
                cutoff = now - retention.ttl_days * 86400
                key = _age_key(tier)
                doomed = [i for i, m in rows if float(m.get(key, m.get("ts", now))) < cutoff]
            gone = set(doomed)
            left = [r for r in rows if r[0] not in gone]
            excess = len(left) - retention.max_items
            if excess > 0:
                doomed += eviction_order(tier, left)[:excess]
            if doomed and not dry_run:
                for start in range(0, len(doomed), PAGE):
                    col.delete(ids=doomed[start : start + PAGE])
            removed[tier.value] = len(doomed)
        if not dry_run and any(removed.values()):
            log.info("memory_pruned", **removed)
        return removed

    async def stats(self) -> dict[str, Any]:
        """Per-tier counts and oldest/newest ts, queue state, and disk use (null in server mode)."""
        return await self._run(self._stats_sync)

    def _stats_sync(self) -> dict[str, Any]:
        tiers: dict[str, Any] = {}
        for tier in Tier:
            rows = _all_metadatas(self._cols[tier])
            stamps = [float(m["ts"]) for _, m in rows if isinstance(m.get("ts"), int | float)]
            tiers[tier.value] = {
                "collection": COLLECTIONS[tier],
                "count": len(rows),
                "oldest_ts": min(stamps) if stamps else None,
                "newest_ts": max(stamps) if stamps else None,
            }
        return {
            "mode": "server" if self.cfg.url else "embedded",
            "location": self.location,
            "tiers": tiers,
            "pending_observations": len(self._pending),
            "dropped_observations": self._dropped,
            "disk_bytes": _dir_size(self._disk_path) if self._disk_path is not None else None,
        }

    # -- shutdown ----------------------------------------------------------------------
    async def close(self) -> None:
        """Flush queued observations, stop the batcher and release the owner lock."""
        if self._closed:
            return
        try:
            if not self.read_only:
                try:
                    await self.flush()
                except Exception as exc:
                    log.error("memory_flush_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self._closed = True
            if self._batcher is not None:
                self._batcher.cancel()
                await asyncio.gather(self._batcher, return_exceptions=True)
            self._executor.shutdown(wait=True)
            if self._lock is not None:
                self._lock.release()


# -- chromadb plumbing (runs on the memory thread) ---------------------------------------
def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=False)


def _persistent_client(path: Path) -> Any:
    import chromadb

    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=_settings())


def _http_client(url: str) -> tuple[Any, str, None]:
    import chromadb

    parts = urlsplit(url)
    ssl = parts.scheme == "https"
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if ssl else 8000)
    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_settings())
    return client, f"{parts.scheme}://{host}:{port}", None


def _collections(client: Any) -> dict[Tier, Any]:
    # embedding_function=None: chromadb's default would download a model on first use.
    return {
        tier: client.get_or_create_collection(
            name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )
        for tier, name in COLLECTIONS.items()
    }


def _all_metadatas(col: Any) -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = []
    offset = 0
    while True:
        res = col.get(include=["metadatas"], limit=PAGE, offset=offset)
        ids = res["ids"]
        rows.extend((i, m or {}) for i, m in zip(ids, res["metadatas"], strict=True))
        if len(ids) < PAGE:
            return rows
        offset += PAGE
