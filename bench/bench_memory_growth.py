"""Resident memory of the vector store under churn, next to raw chromadb doing the same.

Why it exists: the full soak (3,200 cycles) saw the daemon's RSS grow 13 % after warm-up, all of
it in the memory layer. This benchmark separates the causes, each variant in a fresh process so
the figures are its own:

- raw_query / raw_update: 300 items, N queries / N metadata updates (expected flat);
- raw_churn: N adds each followed by a delete of the oldest, so the collection stays at 300 items
  (what retention does); chromadb's HNSW index only marks deleted items (chroma-core/chroma#2594);
- autod_churn: autod's own path, `observe` N times with n0.max_items 300 and a prune every 100
  (a cheap deterministic embedder, so this measures the store, not ONNX);
- reopen_churned / reopen_fresh: a new process opening the churned store, and one opening a
  store that only ever held 300 items: whether a restart gives the memory back.

Prints one JSON document; `--quick` uses N = 1,500 instead of 6,000.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

LIVE = 300
DIM = 384


def rss_kb() -> int:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def disk_kb(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) // 1024


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text: the store's cost without the model's."""

    dim = DIM

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            rng = random.Random(hashlib.sha256(t.encode()).digest())
            v = [rng.gauss(0, 1) for _ in range(DIM)]
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v])
        return out


def _raw(path: Path, variant: str, n: int) -> dict[str, Any]:
    import chromadb
    from chromadb.config import Settings

    emb = HashEmbedder()
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("mem", metadata={"hnsw:space": "cosine"})

    def add(i: int) -> None:
        text = f"observation {i}: check failed in src/mod{i % 50}.py"
        col.add(ids=[str(i)], embeddings=emb.embed([text]), documents=[text], metadatas=[{"ts": float(i)}])

    def query(i: int) -> None:
        col.query(query_embeddings=emb.embed([f"query {i}"]), n_results=8)

    if variant.startswith("reopen"):
        for i in range(20):
            query(i)
        return {"rss_kb": rss_kb(), "count": col.count(), "disk_kb": disk_kb(path)}
    if col.count() == 0:
        for i in range(LIVE):
            add(i)
    if variant == "fill":
        return {"count": col.count()}

    def step(i: int) -> None:
        if variant == "raw_churn":
            add(i)
            col.delete(ids=[str(i - LIVE)])
        elif variant == "raw_update":
            col.update(ids=[str(i % LIVE)], metadatas=[{"ts": float(i)}])
        query(i)

    for i in range(LIVE, 2 * LIVE):  # warm-up: caches, pools and index files reach their steady size
        step(i)
    warm = rss_kb()
    t0 = time.perf_counter()
    for i in range(2 * LIVE, 2 * LIVE + n):
        step(i)
    return {
        "warm_rss_kb": warm,
        "end_rss_kb": rss_kb(),
        "count": col.count(),
        "disk_kb": disk_kb(path),
        "seconds": time.perf_counter() - t0,
    }


def _autod(path: Path, n: int) -> dict[str, Any]:
    from autod.config.settings import MemoryConfig, Retention
    from autod.memory.resilient import ResilientMemory

    cfg = MemoryConfig(n0=Retention(max_items=LIVE))

    async def main() -> dict[str, Any]:
        mem = await ResilientMemory.start(cfg, path, workspace="/bench", embedder=HashEmbedder())
        try:
            assert await mem.wait_open(60), mem.summary()

            async def step(i: int) -> None:
                await mem.observe(
                    f"observation {i}: check failed in src/mod{i % 50}.py", {"fingerprint": f"f{i}"}
                )
                if i % 100 == 0:
                    await mem.flush()
                    await mem.prune()

            for i in range(2 * LIVE):
                await step(i)
            await mem.flush()
            warm = rss_kb()
            t0 = time.perf_counter()
            for i in range(2 * LIVE, 2 * LIVE + n):
                await step(i)
            await mem.flush()
            await mem.prune()
            stats = await mem.stats()
            return {
                "warm_rss_kb": warm,
                "end_rss_kb": rss_kb(),
                "count": stats["tiers"]["n0"]["count"],
                "disk_kb": disk_kb(path),
                "seconds": time.perf_counter() - t0,
            }
        finally:
            await mem.close()

    return asyncio.run(main())


def child(variant: str, path: Path, n: int) -> None:
    result = _autod(path, n) if variant == "autod_churn" else _raw(path, variant, n)
    print(json.dumps(result))


def run_child(variant: str, path: Path, n: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", variant, "--path", str(path), "-n", str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{variant} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if "warm_rss_kb" in out:
        grew = out["end_rss_kb"] - out["warm_rss_kb"]
        out["growth_kb"] = grew
        out["growth_pct"] = round(100 * grew / out["warm_rss_kb"], 1)
        out["kb_per_op"] = round(grew / n, 2)
        out["seconds"] = round(out["seconds"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--path", type=Path)
    ap.add_argument("-n", type=int)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.path, args.n)
        return
    n = 1500 if args.quick else 6000
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        res: dict[str, Any] = {}
        for variant in ("raw_query", "raw_update", "raw_churn", "autod_churn"):
            res[variant] = run_child(variant, root / variant, n)
        res["reopen_churned"] = run_child("reopen", root / "raw_churn", n)
        run_child("fill", root / "fresh", 0)  # a store that only ever held the 300 live items
        res["reopen_fresh"] = run_child("reopen", root / "fresh", 0)
    print(
        json.dumps(
            {
                "bench": "memory_growth",
                "profile": "quick" if args.quick else "full",
                "ops": n,
                "live_items": LIVE,
                **res,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
