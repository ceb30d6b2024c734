"""ChromaMemory over an embedded chromadb: tiers, batching, lessons, recall, retention, stats."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from autod.config import MemoryConfig, Retention
from autod.memory import Tier
from autod.memory.embed import LocalEmbedder
from autod.memory.report import format_hits, format_stats, hits_to_json
from autod.memory.store import ChromaMemory, MemoryReadOnly, clean_metadata

T = TypeVar("T")
NOW = 1_700_000_000.0
DAY = 86400.0
FIX = "When test_config_loader fails with KeyError name, add a default for name in load_config"
FIX_AGAIN = "When test_config_loader fails with KeyError name, add a default value for name in load_config"
PIN = "Pin numpy below 2 when the build fails with an ABI mismatch in the C extension"
FAILURE = "FAILED tests/test_config.py::test_config_loader - KeyError: name"


@pytest.fixture(scope="module")
def real() -> LocalEmbedder:
    e = LocalEmbedder()
    e.load()
    return e


class ScriptedEmbedder:
    """Vectors chosen by the test (by text), else a stable pseudo-random unit vector."""

    dim = 8

    def __init__(self, vectors: dict[str, list[float]] | None = None) -> None:
        self.vectors = vectors or {}
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        out = []
        for t in texts:
            if t in self.vectors:
                v = np.asarray(self.vectors[t], dtype=float)
            else:
                seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "big")
                v = np.random.default_rng(seed).standard_normal(self.dim)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def unit(*xs: float) -> list[float]:
    return [*xs, *([0.0] * (8 - len(xs)))]


def run(state: Path, body: Callable[[ChromaMemory], Awaitable[T]], *, cfg: MemoryConfig | None = None,
        embedder: Any = None, read_only: bool = False) -> T:
    """Open a store, run the body, always close it."""

    async def main() -> T:
        mem = await ChromaMemory.open(cfg or MemoryConfig(), state, embedder=embedder, read_only=read_only)
        try:
            return await body(mem)
        finally:
            await mem.close()

    return asyncio.run(main())


def counts(stats: dict[str, Any]) -> dict[str, int]:
    return {name: t["count"] for name, t in stats["tiers"].items()}


# -- tiers and batching --------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:legacy embedding function config:DeprecationWarning")
def test_each_tier_lives_in_its_own_collection(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> None:
        await mem.observe("obs text", {"kind": "build_failed"})
        await mem.add_episode("episode text", {"status": "fixed"})
        await mem.add_lesson("lesson text", {"fingerprint": "fp"}, success=True)
        await mem.flush()

    run(tmp_path, body, embedder=ScriptedEmbedder())
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=str(tmp_path / "memory"), settings=settings)
    docs = {c.name: client.get_collection(c.name).get()["documents"] for c in client.list_collections()}
    assert docs == {"mem_n0": ["obs text"], "mem_n1": ["episode text"], "mem_n2": ["lesson text"]}
    assert client.get_collection("mem_n2").configuration["hnsw"]["space"] == "cosine"


def test_background_batcher_writes_observations_without_flush(tmp_path: Path) -> None:
    emb = ScriptedEmbedder()

    async def body(mem: ChromaMemory) -> dict[str, int]:
        ids = [await mem.observe(f"line {i}", {"kind": "log"}) for i in range(3)]
        assert len(set(ids)) == 3
        for _ in range(100):  # hang guard: 10 s
            if counts(await mem.stats())["n0"] == 3:
                break
            await asyncio.sleep(0.1)
        return counts(await mem.stats())

    assert run(tmp_path, body, embedder=emb)["n0"] == 3
    assert [len(c) for c in emb.calls] == [3]  # one batch, one embedding call


def test_observations_are_written_in_batches_of_at_most_64(tmp_path: Path) -> None:
    emb = ScriptedEmbedder()

    async def body(mem: ChromaMemory) -> dict[str, int]:
        for i in range(150):
            await mem.observe(f"obs {i}", {})
        await mem.flush()
        return counts(await mem.stats())

    assert run(tmp_path, body, embedder=emb)["n0"] == 150
    sizes = [len(c) for c in emb.calls]
    assert sum(sizes) == 150 and max(sizes) <= 64


def test_close_flushes_queued_observations(tmp_path: Path) -> None:
    async def write(mem: ChromaMemory) -> None:
        await mem.observe("written at close", {})

    async def read(mem: ChromaMemory) -> dict[str, int]:
        return counts(await mem.stats())

    run(tmp_path, write, embedder=ScriptedEmbedder())
    assert run(tmp_path, read, embedder=ScriptedEmbedder(), read_only=True)["n0"] == 1


def test_metadata_timestamps_are_stored_as_epoch_floats() -> None:
    meta = clean_metadata({"ts": "2024-01-01T00:00:00+00:00", "paths": ["a", "b"], "none": None}, NOW)
    assert meta == {"ts": 1704067200.0, "paths": '["a", "b"]'}
    assert clean_metadata({}, NOW)["ts"] == NOW


# -- lessons ---------------------------------------------------------------------------
def test_near_duplicate_lesson_updates_counts_and_text(tmp_path: Path, real: LocalEmbedder) -> None:
    async def body(mem: ChromaMemory) -> None:
        first = await mem.add_lesson(FIX, {"fingerprint": "fp1"}, success=False, now=NOW)
        again = await mem.add_lesson(FIX_AGAIN, {"fingerprint": "fp1"}, success=True, now=NOW + 60)
        other = await mem.add_lesson(PIN, {"fingerprint": "fp2"}, success=True, now=NOW + 120)
        assert again == first
        assert other != first
        stored = mem._cols[Tier.N2].get(ids=[first])
        assert stored["documents"] == [FIX_AGAIN]
        meta = stored["metadatas"][0]
        assert (meta["uses"], meta["successes"], meta["ts"], meta["last_used"]) == (2, 1, NOW + 60, NOW + 60)
        assert counts(await mem.stats())["n2"] == 2

    run(tmp_path, body, embedder=real)


def test_same_failure_text_recalls_the_earlier_lesson(tmp_path: Path, real: LocalEmbedder) -> None:
    async def body(mem: ChromaMemory) -> None:
        lesson = await mem.add_lesson(FIX, {"fingerprint": "fp1"}, success=True, now=NOW)
        await mem.add_lesson(PIN, {"fingerprint": "fp2"}, success=True, now=NOW)
        await mem.add_episode("Rewrote the README introduction", {"status": "improved", "ts": NOW})
        for line in ("watcher saw 3 files change", "cron fired auto-plan", "disk usage is 40%"):
            await mem.observe(line, {"ts": NOW})
        hits = await mem.recall(FAILURE, budget_tokens=1500, now=NOW + 5 * DAY)
        assert hits[0].id == lesson and hits[0].tier is Tier.N2
        assert hits[0].metadata["fingerprint"] == "fp1"
        await mem.flush()
        assert mem._cols[Tier.N2].get(ids=[lesson])["metadatas"][0]["last_used"] == NOW + 5 * DAY

    run(tmp_path, body, embedder=real)


# -- recall ranking through the store ----------------------------------------------------
def test_lesson_that_led_to_a_fix_outranks_a_closer_one_that_did_not(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"q": unit(1), "worked": unit(0.8, 0.6), "failed": unit(0.85, -0.527)})

    async def body(mem: ChromaMemory) -> list[str]:
        await mem.add_lesson("worked", {}, success=True, now=NOW)
        await mem.add_lesson("failed", {}, success=False, now=NOW)
        return [h.text for h in await mem.recall("q", budget_tokens=1000, now=NOW)]

    assert run(tmp_path, body, embedder=emb) == ["worked", "failed"]


def test_old_observation_decays_below_a_fresh_one(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"q": unit(1), "old": unit(0.95, 0.312), "fresh": unit(0.7, 0.714)})

    async def body(mem: ChromaMemory) -> list[str]:
        await mem.observe("old", {"ts": NOW - 3 * DAY})
        await mem.observe("fresh", {"ts": NOW - 60})
        await mem.flush()
        return [h.text for h in await mem.recall("q", budget_tokens=1000, now=NOW)]

    assert run(tmp_path, body, embedder=emb) == ["fresh", "old"]


def test_recall_packs_the_best_items_into_the_token_budget(tmp_path: Path) -> None:
    texts = {f"item {i} " + "x" * 60: unit(1 - i / 20, (1 - (1 - i / 20) ** 2) ** 0.5) for i in range(6)}
    emb = ScriptedEmbedder({"q": unit(1), **texts})

    async def body(mem: ChromaMemory) -> list[str]:
        for t in texts:
            await mem.add_episode(t, {"ts": NOW})
        return [h.text[:6] for h in await mem.recall("q", budget_tokens=60, now=NOW)]  # 25 tokens each

    assert run(tmp_path, body, embedder=emb) == ["item 0", "item 1"]


def test_recall_uses_one_query_embedding_for_all_tiers(tmp_path: Path) -> None:
    emb = ScriptedEmbedder()

    async def body(mem: ChromaMemory) -> None:
        await mem.add_episode("e", {})
        emb.calls.clear()
        await mem.recall("query", budget_tokens=100)

    run(tmp_path, body, embedder=emb)
    assert emb.calls == [["query"]]


def test_search_filters_by_tier_and_scores_by_similarity(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"q": unit(1), "a": unit(0.6, 0.8), "b": unit(0.8, 0.6)})

    async def body(mem: ChromaMemory) -> None:
        await mem.add_episode("a", {})
        await mem.add_lesson("b", {}, success=True)
        all_hits = await mem.search("q")
        assert [(h.text, round(h.score, 3)) for h in all_hits] == [("b", 0.8), ("a", 0.6)]
        assert [h.text for h in await mem.search("q", tier=Tier.N1)] == ["a"]
        assert "n2" in format_hits(all_hits) and hits_to_json(all_hits)[0]["tier"] == "n2"

    run(tmp_path, body, embedder=emb)


# -- retention -----------------------------------------------------------------------------
def test_ttl_then_max_items_for_observations_and_episodes(tmp_path: Path) -> None:
    cfg = MemoryConfig(n0=Retention(ttl_days=7, max_items=10), n1=Retention(ttl_days=90, max_items=10))

    async def body(mem: ChromaMemory) -> None:
        for i in range(3):
            await mem.observe(f"expired {i}", {"ts": NOW - 8 * DAY - i})
            await mem.add_episode(f"expired ep {i}", {"ts": NOW - 91 * DAY - i})
        for i in range(12):
            await mem.observe(f"kept obs {i}", {"ts": NOW - 100 * (12 - i)})
            await mem.add_episode(f"kept ep {i}", {"ts": NOW - 100 * (12 - i)})
        await mem.flush()
        assert await mem.prune(dry_run=True, now=NOW) == {"n0": 5, "n1": 5, "n2": 0}
        assert counts(await mem.stats()) == {"n0": 15, "n1": 15, "n2": 0}
        assert await mem.prune(now=NOW) == {"n0": 5, "n1": 5, "n2": 0}
        for tier in (Tier.N0, Tier.N1):
            left = sorted(mem._cols[tier].get()["documents"])
            assert len(left) == 10
            assert not any(d.startswith("expired") for d in left)
            assert not any(d.endswith((" 0", " 1")) for d in left)  # the two oldest kept ones went
        assert await mem.prune(now=NOW) == {"n0": 0, "n1": 0, "n2": 0}

    run(tmp_path, body, cfg=cfg, embedder=ScriptedEmbedder())


def test_lessons_have_no_ttl_by_default_but_a_configured_one_ages_by_last_use(tmp_path: Path) -> None:
    cfg = MemoryConfig(n2=Retention(ttl_days=30, max_items=100))

    async def body(mem: ChromaMemory) -> None:
        await mem.add_lesson("stale", {}, success=True, now=NOW - 40 * DAY)
        await mem.add_lesson("old but recalled", {}, success=True, now=NOW - 40 * DAY)
        mem._cols[Tier.N2].update(ids=[(await mem.search("old but recalled", k=1))[0].id],
                                  metadatas=[{"last_used": NOW - DAY}])
        assert await mem.prune(now=NOW) == {"n0": 0, "n1": 0, "n2": 1}
        assert mem._cols[Tier.N2].get()["documents"] == ["old but recalled"]

    run(tmp_path, body, cfg=cfg, embedder=ScriptedEmbedder())


def test_n2_over_max_items_evicts_least_useful_then_least_recently_used(tmp_path: Path) -> None:
    cfg = MemoryConfig(n2=Retention(ttl_days=None, max_items=10))

    async def body(mem: ChromaMemory) -> None:
        for i in range(9):
            await mem.add_lesson(f"useful {i}", {}, success=True, now=NOW - i)
        await mem.add_lesson("useless, used recently", {}, success=False, now=NOW)
        await mem.add_lesson("useless, used long ago", {}, success=False, now=NOW - 10 * DAY)
        await mem.add_lesson("useless, used long ago", {}, success=False, now=NOW - 10 * DAY)  # merged
        assert counts(await mem.stats())["n2"] == 11
        assert await mem.prune(now=NOW) == {"n0": 0, "n1": 0, "n2": 1}
        docs = mem._cols[Tier.N2].get()["documents"]
        assert "useless, used long ago" not in docs and "useless, used recently" in docs

    run(tmp_path, body, cfg=cfg, embedder=ScriptedEmbedder())


# -- modes, stats, settings --------------------------------------------------------------
def test_read_only_store_refuses_writes_and_does_not_mark_lessons_used(tmp_path: Path) -> None:
    emb = ScriptedEmbedder()

    async def seed(mem: ChromaMemory) -> None:
        await mem.add_lesson("lesson", {}, success=True, now=NOW)

    async def look(mem: ChromaMemory) -> None:
        with pytest.raises(MemoryReadOnly):
            await mem.observe("x", {})
        with pytest.raises(MemoryReadOnly):
            await mem.add_lesson("y", {}, success=True)
        with pytest.raises(MemoryReadOnly):
            await mem.prune()
        assert await mem.prune(dry_run=True) == {"n0": 0, "n1": 0, "n2": 0}
        [hit] = await mem.recall("lesson", budget_tokens=100, now=NOW + DAY)
        assert hit.metadata["last_used"] == NOW

    run(tmp_path, seed, embedder=emb)
    run(tmp_path, look, embedder=emb, read_only=True)


def test_stats_reports_counts_time_range_and_disk_size(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> dict[str, Any]:
        await mem.add_episode("a", {"ts": NOW - 10})
        await mem.add_episode("b", {"ts": NOW})
        return await mem.stats()

    stats = run(tmp_path, body, embedder=ScriptedEmbedder())
    n1 = stats["tiers"]["n1"]
    assert n1 == {"collection": "mem_n1", "count": 2, "oldest_ts": NOW - 10, "newest_ts": NOW}
    assert stats["tiers"]["n0"]["oldest_ts"] is None
    assert stats["mode"] == "embedded" and stats["disk_bytes"] > 0
    text = format_stats(stats)
    assert "mem_n1" in text and "2023-11-14" in text


def test_embedded_client_has_telemetry_off(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> bool:
        return bool(mem._client.get_settings().anonymized_telemetry)

    assert run(tmp_path, body, embedder=ScriptedEmbedder()) is False


def test_use_mark_of_a_lesson_deleted_after_recall_is_dropped_quietly(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> None:
        gone = await mem.add_lesson("gone", {}, success=True, now=NOW)
        kept = await mem.add_lesson("kept", {}, success=True, now=NOW)
        assert {h.id for h in await mem.recall("gone", budget_tokens=100, now=NOW + DAY)} == {gone, kept}
        mem._cols[Tier.N2].delete(ids=[gone])
        await mem.flush()
        assert mem._cols[Tier.N2].get(ids=[kept])["metadatas"][0]["last_used"] == NOW + DAY
        assert mem._cols[Tier.N2].get(ids=[gone])["ids"] == []

    run(tmp_path, body, embedder=ScriptedEmbedder())


def test_deferred_episode_and_lesson_are_seen_by_the_next_recall_and_search(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"q": unit(1), "lesson": unit(0.9, 0.1), "episode": unit(0.8, 0.2)})

    async def body(mem: ChromaMemory) -> tuple[list[str], list[str], dict[str, int]]:
        assert await mem.add_lesson("lesson", {"fingerprint": "fp"}, success=True, now=NOW, defer=True) == ""
        await mem.add_episode("episode", {"status": "fixed", "ts": NOW}, defer=True)
        recalled = [h.text for h in await mem.recall("q", budget_tokens=1000, now=NOW)]
        found = [h.text for h in await mem.search("q", tier=Tier.N2)]
        return recalled, found, counts(await mem.stats())

    recalled, found, n = run(tmp_path, body, embedder=emb)
    assert set(recalled) == {"lesson", "episode"} and found == ["lesson"]
    assert n["n1"] == 1 and n["n2"] == 1


def test_close_writes_deferred_lessons(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"lesson": unit(1)})

    async def write(mem: ChromaMemory) -> None:
        await mem.add_lesson("lesson", {}, success=False, now=NOW, defer=True)

    async def read(mem: ChromaMemory) -> dict[str, int]:
        return counts(await mem.stats())

    run(tmp_path, write, embedder=emb)
    assert run(tmp_path, read, embedder=emb)["n2"] == 1
