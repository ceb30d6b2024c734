"""Fleet memory at scale: `memory stats` from counters against a full scan, and a chunked prune with
recall running beside it, embedded and on a `chroma run` server shared with another daemon.

For each store, N0 is filled with random unit vectors (the index cost does not depend on what
they mean) whose timestamps spread over twice the TTL, so a prune removes about half. Measured:

- ``stats_ms``: ``ChromaMemory.stats()`` (chromadb's count per tier and the local tally), next to
  ``full_scan_ms``: reading every item's metadata, which is what `memory stats` did before;
- ``prune_s`` and how many went, while a loop of real recalls runs beside it: their latency
  (p50/p95/max) during the prune against the same recalls before it. A prune that were one job on
  the memory thread would hold every recall for the whole ``prune_s``.

Lessons (a twentieth of N0) are in the shared N2. In the server case another daemon has a fifth
as many observations in its own collection and as many lessons in the shared one; its items must
survive the prune, which applies to this daemon's items only.

    python bench/bench_memory_fleet.py            # 100k items, embedded and server
    python bench/bench_memory_fleet.py --quick    # 10k items
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from autod.config.settings import MemoryConfig, Retention
from autod.memory import Tier
from autod.memory.embed import LocalEmbedder
from autod.memory.identity import Identity
from autod.memory.store import ChromaMemory

CHUNK = 4000
ME = Identity("f1" * 8, "/srv/me")
OTHER = Identity("f2" * 8, "/srv/other")
WORDS = ["error", "failed", "test", "import", "module", "config", "build", "timeout", "KeyError", "None"]


def fill(col: Any, who: Identity, n: int, now: float, spread_s: float, seed: int) -> float:
    """n random-vector items of `who`, ts spread evenly over spread_s; returns items/s."""
    rng = np.random.default_rng(seed)
    words = random.Random(seed)
    start = time.perf_counter()
    for off in range(0, n, CHUNK):
        m = min(CHUNK, n - off)
        v = rng.standard_normal((m, 384)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        col.add(
            ids=[f"{who.instance}-{off + i}" for i in range(m)],
            embeddings=v.tolist(),
            documents=[" ".join(words.choice(WORDS) for _ in range(12)) for _ in range(m)],
            metadatas=[
                {"ts": now - spread_s * (off + i) / n, "kind": "bench", **who.stamp()} for i in range(m)
            ],
        )
    return n / (time.perf_counter() - start)


def full_scan(mem: ChromaMemory) -> int:
    """What `memory stats` did before: every item's metadata, page by page."""
    rows = 0
    for tier in Tier:
        offset = 0
        while True:
            got = mem._cols[tier].get(include=["metadatas"], limit=2000, offset=offset)
            rows += len(got["ids"])
            offset += len(got["ids"])
            if len(got["ids"]) < 2000:
                break
    return rows


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else float("nan")


async def one_store(
    state: Path, cfg: MemoryConfig, embedder: LocalEmbedder, n: int, other: int
) -> dict[str, Any]:
    mem = await ChromaMemory.open(cfg, state, embedder=embedder, who=ME)
    try:
        now = time.time()
        ttl_s = (cfg.n0.ttl_days or 7) * 86400
        theirs: Any = None
        rate = await asyncio.to_thread(fill, mem._cols[Tier.N0], ME, n, now, 2 * ttl_s, 1)
        # lessons, shared: a twentieth of the observations each, ours and another daemon's
        await asyncio.to_thread(fill, mem._cols[Tier.N2], ME, n // 20, now, 0.0, 3)
        if other:
            # the other daemon's observations are in its own collection, its lessons in the shared one
            theirs = mem._client.get_or_create_collection(
                f"{cfg.collection_prefix}n0.{OTHER.instance}", embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}})
            await asyncio.to_thread(fill, theirs, OTHER, other, now, 2 * ttl_s, 2)
            await asyncio.to_thread(fill, mem._cols[Tier.N2], OTHER, n // 20, now, 0.0, 4)
        t0 = time.perf_counter()
        stats = await mem.stats()
        stats_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        scanned = await asyncio.to_thread(full_scan, mem)
        scan_ms = (time.perf_counter() - t0) * 1000
        queries = [" ".join(random.Random(i).choice(WORDS) for _ in range(10)) for i in range(400)]
        idle: list[float] = []
        for q in queries[:30]:
            t0 = time.perf_counter()
            await mem.recall(q, budget_tokens=1500)
            idle.append((time.perf_counter() - t0) * 1000)
        during: list[float] = []
        prune = asyncio.create_task(mem.prune())
        t_prune = time.perf_counter()
        i = 30
        while not prune.done():
            t0 = time.perf_counter()
            await mem.recall(queries[i % len(queries)], budget_tokens=1500)
            during.append((time.perf_counter() - t0) * 1000)
            i += 1
        removed = await prune
        prune_s = time.perf_counter() - t_prune
        left = await mem.counts()
        own_left = (await mem.own_counts())["n0"]
        other_left = await asyncio.to_thread(theirs.count) if other else None
    finally:
        await mem.close()
    return {
        "items_n0": {"this_daemon": n, "another_daemon": other},
        "fill_items_per_s": round(rate, 1),
        "stats_ms": round(stats_ms, 1),
        "stats_count_n0": stats["tiers"]["n0"]["count"],
        "full_scan_ms": round(scan_ms, 1),
        "full_scan_rows": scanned,
        "prune_s": round(prune_s, 2),
        "pruned": removed,
        "left_n0": {"this_daemon": own_left, "collection": left["n0"], "another_daemon": other_left},
        "recall_idle_ms": {"p50": round(statistics.median(idle), 2), "p95": pct(idle, 95)},
        "recall_during_prune_ms": {
            "n": len(during),
            "p50": round(statistics.median(during), 2) if during else None,
            "p95": pct(during, 95),
            "max": round(max(during), 2) if during else None,
        },
    }


async def main(quick: bool) -> dict[str, Any]:
    n = 10_000 if quick else 100_000
    big = Retention(ttl_days=None, max_items=10_000_000)
    cfg = MemoryConfig(n0=Retention(ttl_days=7, max_items=10_000_000), n1=big, n2=big, timeout_s=120)
    embedder = LocalEmbedder()
    embedder.load()
    out: dict[str, Any] = {
        "benchmark": "memory_fleet",
        "profile": "quick" if quick else "full",
        "python": platform.python_version(),
    }
    with tempfile.TemporaryDirectory(prefix="autod-bench-fleet-") as tmp:
        out["embedded"] = await one_store(Path(tmp) / "embedded", cfg, embedder, n, 0)
        from chromaserver import ChromaServer

        server = ChromaServer(Path(tmp))
        if server.chroma.exists():
            server.start()
            try:
                scfg = cfg.model_copy(update={"url": server.url})
                out["server"] = await one_store(Path(tmp) / "server", scfg, embedder, n, n // 5)
            finally:
                server.stop()
    return out


if __name__ == "__main__":
    from autod import logs

    logs.configure_logging(level="warning", file=None)  # stdout carries the JSON document only
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k items")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.quick)), indent=2))
