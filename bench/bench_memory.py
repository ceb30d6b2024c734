"""Memory benchmark: insert throughput and recall latency against the raw-chromadb floor.

Prints one JSON document. For each scale point the store is filled with random unit vectors
(fast, and the index cost does not depend on what the vectors mean), then every query is timed
three times, interleaved: through ``ResilientMemory.recall`` (what the daemon calls: the spool
check for the cycle's own writes, the deadline, the use marks spooled), through the raw store's
``ChromaMemory.recall`` (one real query embedding, three collection queries, scoring, packing, the
memory-thread hop), and as the floor (the same real embedding plus three raw ``collection.query``
calls). Insert throughput with real embeddings goes through ResilientMemory (spool, writer) on a
small subset, since the local model is the bottleneck. Recall spools its "lesson used" marks; the
bench writes them between queries, outside every timing.

    python bench/bench_memory.py            # 10k items, then 100k N0 / 20k N1 / 5k N2 (minutes)
    python bench/bench_memory.py --quick    # 2k / 1k / 500 (well under a minute)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autod.config.settings import MemoryConfig, Retention
from autod.memory import Tier
from autod.memory.embed import LocalEmbedder
from autod.memory.identity import Identity
from autod.memory.resilient import ResilientMemory
from autod.memory.store import ChromaMemory

CHUNK = 4000  # below chromadb's max batch size
INCLUDE: Any = ["documents", "metadatas", "distances"]  # what ChromaMemory.recall asks for
WHO = Identity("be" * 8, "/bench")
WORDS = [
    "error", "failed", "test", "import", "module", "config", "build", "timeout", "assert",
    "KeyError", "TypeError", "None", "missing", "file", "path", "src", "tests", "parser", "loader",
    "cache", "retry", "socket", "refused", "permission", "denied", "null", "index", "range",
    "overflow", "deprecated", "warning", "version", "mismatch", "numpy", "lint",
]


def sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> list[list[float]]:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.tolist()


def fill(mem: ChromaMemory, sizes: dict[Tier, int], dim: int, now: float) -> float:
    """Random-vector items straight into the collections; returns items/s."""
    rng = np.random.default_rng(7)
    texts = random.Random(7)
    total, start = 0, time.perf_counter()
    for tier, n in sizes.items():
        col = mem._cols[tier]
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            ids = [f"{tier.value}-{off + i}" for i in range(m)]
            metas: list[dict[str, Any]] = []
            for i in range(m):
                meta: dict[str, Any] = {"ts": now - (off + i) * 7.0, "kind": "bench", "fingerprint": f"fp{i}"}
                if tier is Tier.N2:
                    meta.update(uses=1 + i % 5, successes=i % 3, last_used=now - i)
                if tier is Tier.N1:
                    meta["status"] = "fixed" if i % 4 == 0 else "rolled_back"
                metas.append(meta)
            col.add(ids=ids, embeddings=unit_vectors(rng, m, dim),
                    documents=[sentence(texts) for _ in range(m)], metadatas=metas)
            total += m
    return total / (time.perf_counter() - start)


async def real_inserts(state: Path, embedder: LocalEmbedder, n: int) -> dict[str, float]:
    """Observations (spooled, written in batches) and lessons (one by one, with the dedupe query)."""
    rng = random.Random(11)
    mem = await ResilientMemory.start(MemoryConfig(), state, workspace="/bench", embedder=embedder)
    try:
        assert await mem.wait_open(60), mem.summary()
        start = time.perf_counter()
        for _ in range(n):
            await mem.observe(sentence(rng), {"kind": "bench"})
        await mem.flush()
        observe_rate = n / (time.perf_counter() - start)
        lessons = max(20, n // 10)
        start = time.perf_counter()
        for _ in range(lessons):
            await mem.add_lesson(sentence(rng, 20), {"fingerprint": "fp"}, success=True)
        lesson_rate = lessons / (time.perf_counter() - start)
    finally:
        await mem.close()
    return {"items": n, "observe_items_per_s": round(observe_rate, 1), "lessons": lessons,
            "add_lesson_items_per_s": round(lesson_rate, 1)}


async def scale_point(
    state: Path, embedder: LocalEmbedder, sizes: dict[Tier, int], queries: int
) -> dict[str, Any]:
    """Fill the tiers, then time recall and the floor on the same queries, interleaved."""
    now = time.time()
    big = Retention(ttl_days=None, max_items=10_000_000)
    cfg = MemoryConfig(n0=big, n1=big, n2=big)
    mem = await ChromaMemory.open(cfg, state, embedder=embedder, who=WHO)

    async def same_store(_cfg: MemoryConfig, _token: str | None) -> ChromaMemory:
        return mem

    wrapped = await ResilientMemory.start(cfg, state, workspace="/bench", opener=same_store)
    try:
        assert await wrapped.wait_open(60), wrapped.summary()
        fill_rate = await asyncio.to_thread(fill, mem, sizes, embedder.dim, now)
        rng = random.Random(3)
        texts = [sentence(rng) for _ in range(queries + 5)]
        cols = [mem._cols[t] for t in Tier]
        k = 8

        def floor(q: str) -> float:
            t0 = time.perf_counter()
            [vec] = embedder.embed([q])
            for col in cols:
                col.query(query_embeddings=[vec], n_results=2 * k, include=INCLUDE)
            return (time.perf_counter() - t0) * 1000

        recall_ms: list[float] = []
        raw_ms: list[float] = []
        floor_ms: list[float] = []
        for i, q in enumerate(texts):
            f = await asyncio.to_thread(floor, q)
            t0 = time.perf_counter()
            await mem.recall(q, budget_tokens=1500, k=k)
            raw = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            await wrapped.recall(q, budget_tokens=1500, k=k)
            r = (time.perf_counter() - t0) * 1000
            # The lesson-use marks recall spooled are written here, off the clock, so that
            # the background write never overlaps (and slows) the next measurement.
            await wrapped.flush()
            if i >= 5:  # the first few warm caches and the index
                floor_ms.append(f)
                raw_ms.append(raw)
                recall_ms.append(r)
    finally:
        await wrapped.close()  # closes the store too
    rp50, fp50 = statistics.median(recall_ms), statistics.median(floor_ms)
    return {
        "items": {t.value: n for t, n in sizes.items()},
        "fill_random_items_per_s": round(fill_rate, 1),
        "queries": queries,
        "recall_ms": {"p50": round(rp50, 2), "p95": round(pct(recall_ms, 95), 2)},
        "raw_store_recall_ms": {"p50": round(statistics.median(raw_ms), 2), "p95": round(pct(raw_ms, 95), 2)},
        "recall_over_raw_store_p50": round(rp50 / statistics.median(raw_ms), 3),
        "floor_ms": {"p50": round(fp50, 2), "p95": round(pct(floor_ms, 95), 2)},
        "recall_over_floor_p50": round(rp50 / fp50, 3),
        "recall_over_floor_p95": round(pct(recall_ms, 95) / pct(floor_ms, 95), 3),
    }


async def main(quick: bool) -> dict[str, Any]:
    embedder = LocalEmbedder()
    start = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - start
    if quick:
        points = [{Tier.N0: 2000, Tier.N1: 1000, Tier.N2: 500}]
        real_n, queries = 200, 60
    else:
        points = [
            {Tier.N0: 7000, Tier.N1: 2000, Tier.N2: 1000},
            {Tier.N0: 100_000, Tier.N1: 20_000, Tier.N2: 5000},
        ]
        real_n, queries = 1000, 200
    with tempfile.TemporaryDirectory(prefix="autod-bench-") as tmp:
        real = await real_inserts(Path(tmp) / "real", embedder, real_n)
        results = [
            await scale_point(Path(tmp) / f"p{i}", embedder, sizes, queries) for i, sizes in enumerate(points)
        ]
    return {
        "benchmark": "memory",
        "profile": "quick" if quick else "full",
        "python": platform.python_version(),
        "model_load_s": round(load_s, 3),
        "insert_real_embeddings": real,
        "scale": results,
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


if __name__ == "__main__":
    from autod import logs

    logs.configure_logging(level="warning", file=None)  # stdout carries the JSON document only
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small profile, well under a minute")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.quick)), indent=2))
