"""ChromaMemory (the raw store) over an embedded chromadb: tiers, lessons, recall, retention, stats.

Spooling, batching and degrading are ResilientMemory's (test_memory_resilient.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from autod.config.settings import MemoryConfig, Retention
from autod.memory import Tier
from autod.memory.embed import LocalEmbedder
from autod.memory.identity import Identity
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

    def load(self) -> None: ...

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
        mem = await ChromaMemory.open(cfg or MemoryConfig(), state, embedder=embedder, read_only=read_only,
                                      who=Identity("a" * 16, "/srv/repo"))
        try:
            return await body(mem)
        finally:
            await mem.close()

    return asyncio.run(main())


def counts(stats: dict[str, Any]) -> dict[str, int]:
    return {name: t["count"] for name, t in stats["tiers"].items()}


async def observe(mem: ChromaMemory, text: str, meta: dict[str, Any]) -> str:
    item = uuid.uuid4().hex
    await mem.add(Tier.N0, [(item, text, meta)])
    return item


async def episode(mem: ChromaMemory, text: str, meta: dict[str, Any]) -> str:
    item = uuid.uuid4().hex
    await mem.add(Tier.N1, [(item, text, meta)])
    return item


async def lesson(mem: ChromaMemory, text: str, meta: dict[str, Any], *, success: bool,
                 now: float | None = None, item_id: str | None = None) -> str:
    return await mem.add_lesson(text, meta, success=success, item_id=item_id or uuid.uuid4().hex, now=now)


# -- tiers and items ------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:legacy embedding function config:DeprecationWarning")
def test_each_tier_lives_in_its_own_collection_named_with_the_prefix(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> None:
        await observe(mem, "obs text", {"kind": "build_failed"})
        await episode(mem, "episode text", {"status": "fixed"})
        await lesson(mem, "lesson text", {"fingerprint": "fp"}, success=True)

    run(tmp_path, body, cfg=MemoryConfig(collection_prefix="team_a."), embedder=ScriptedEmbedder())
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=str(tmp_path / "memory"), settings=settings)
    docs = {c.name: client.get_collection(c.name).get()["documents"] for c in client.list_collections()}
    assert docs == {"team_a.n0": ["obs text"], "team_a.n1": ["episode text"], "team_a.n2": ["lesson text"]}
    assert client.get_collection("team_a.n2").configuration["hnsw"]["space"] == "cosine"


def test_every_item_records_the_daemon_and_workspace_that_wrote_it(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> list[dict[str, Any]]:
        await observe(mem, "obs", {})
        await lesson(mem, "lesson", {}, success=True)
        return [m for t in (Tier.N0, Tier.N2) for m in mem._cols[t].get()["metadatas"]]

    for meta in run(tmp_path, body, embedder=ScriptedEmbedder()):
        assert (meta["instance"], meta["workspace"]) == ("a" * 16, "/srv/repo")


def test_a_write_replayed_under_the_same_id_is_stored_once(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> tuple[dict[str, int], tuple[int, int]]:
        await mem.add(Tier.N0, [("same-id", "obs", {"ts": NOW})])
        await mem.add(Tier.N0, [("same-id", "obs", {"ts": NOW})])  # the first landed, its ack did not
        first = await lesson(mem, FIX, {"fingerprint": "fp"}, success=True, item_id="l1")
        assert await lesson(mem, FIX, {"fingerprint": "fp"}, success=True, item_id="l1") == first
        merged = await lesson(mem, FIX_AGAIN, {"fingerprint": "fp"}, success=True, item_id="l2")
        assert await lesson(mem, FIX_AGAIN, {"fingerprint": "fp"}, success=True, item_id="l2") == merged
        meta = mem._cols[Tier.N2].get(ids=[first])["metadatas"][0]
        return counts(await mem.stats()), (meta["uses"], meta["successes"])

    n, uses = run(tmp_path, body, embedder=ScriptedEmbedder({FIX: unit(1), FIX_AGAIN: unit(0.99, 0.14)}))
    assert n == {"n0": 1, "n1": 0, "n2": 1} and uses == (2, 2)


def test_metadata_timestamps_are_stored_as_epoch_floats() -> None:
    meta = clean_metadata({"ts": "2024-01-01T00:00:00+00:00", "paths": ["a", "b"], "none": None}, NOW)
    assert meta == {"ts": 1704067200.0, "paths": '["a", "b"]'}
    assert clean_metadata({}, NOW)["ts"] == NOW


# -- lessons ---------------------------------------------------------------------------
@pytest.mark.slow
def test_near_duplicate_lesson_of_the_same_sign_updates_counts_and_text(
    tmp_path: Path, real: LocalEmbedder
) -> None:
    async def body(mem: ChromaMemory) -> None:
        first = await lesson(mem, FIX, {"fingerprint": "fp1"}, success=True, now=NOW)
        again = await lesson(mem, FIX_AGAIN, {"fingerprint": "fp1"}, success=True, now=NOW + 60)
        other = await lesson(mem, PIN, {"fingerprint": "fp2"}, success=True, now=NOW + 120)
        assert again == first
        assert other != first
        stored = mem._cols[Tier.N2].get(ids=[first])
        assert stored["documents"] == [FIX_AGAIN]
        meta = stored["metadatas"][0]
        assert (meta["uses"], meta["successes"], meta["ts"], meta["last_used"]) == (2, 2, NOW + 60, NOW + 60)
        assert counts(await mem.stats())["n2"] == 2

    run(tmp_path, body, embedder=real)


def test_a_failure_never_merges_into_a_success_lesson_and_leaves_its_text_and_counts(
    tmp_path: Path, real: LocalEmbedder
) -> None:
    async def body(mem: ChromaMemory) -> None:
        success = await lesson(mem, FIX, {"fingerprint": "fp1", "status": "fixed"}, success=True, now=NOW)
        # near-identical text, same fingerprint: before polarity, this merged and rewrote the success
        failure = await lesson(mem, FIX_AGAIN, {"fingerprint": "fp1", "status": "rejected"}, success=False,
                               now=NOW + 60)
        assert failure != success
        got = mem._cols[Tier.N2].get(ids=[success, failure])
        by_id = dict(zip(got["ids"], zip(got["documents"], got["metadatas"], strict=True), strict=True))
        text, meta = by_id[success]
        assert text == FIX and (meta["uses"], meta["successes"], meta["status"]) == (1, 1, "fixed")
        assert meta["polarity"] == "success"
        text, meta = by_id[failure]
        assert text == FIX_AGAIN and (meta["uses"], meta["successes"], meta["polarity"]) == (1, 0, "failure")
        # and a second failure merges into the failure, never the success
        assert await lesson(mem, FIX_AGAIN, {"fingerprint": "fp1"}, success=False, now=NOW + 90) == failure
        assert mem._cols[Tier.N2].get(ids=[success])["metadatas"][0]["uses"] == 1

    run(tmp_path, body, embedder=real)


def test_a_lesson_without_a_polarity_is_never_merged_into(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"old": unit(1), "new": unit(0.999, 0.04)})

    async def body(mem: ChromaMemory) -> None:
        old = await lesson(mem, "old", {}, success=True, now=NOW)
        meta = dict(mem._cols[Tier.N2].get(ids=[old])["metadatas"][0])
        del meta["polarity"]  # written by a version that did not record the sign
        mem._cols[Tier.N2].delete(ids=[old])
        mem._cols[Tier.N2].add(ids=[old], embeddings=[unit(1)], documents=["old"], metadatas=[meta])
        assert await lesson(mem, "new", {}, success=True, now=NOW) != old

    run(tmp_path, body, embedder=emb)


@pytest.mark.slow
def test_same_failure_text_recalls_the_earlier_lesson(tmp_path: Path, real: LocalEmbedder) -> None:
    async def body(mem: ChromaMemory) -> None:
        first = await lesson(mem, FIX, {"fingerprint": "fp1"}, success=True, now=NOW)
        await lesson(mem, PIN, {"fingerprint": "fp2"}, success=True, now=NOW)
        await episode(mem, "Rewrote the README introduction", {"status": "improved", "ts": NOW})
        for line in ("watcher saw 3 files change", "cron fired auto-plan", "disk usage is 40%"):
            await observe(mem, line, {"ts": NOW})
        hits = await mem.recall(FAILURE, budget_tokens=1500, now=NOW + 5 * DAY)
        assert hits[0].id == first and hits[0].tier is Tier.N2
        assert hits[0].metadata["fingerprint"] == "fp1"
        await mem.mark_used({first: NOW + 5 * DAY})
        assert mem._cols[Tier.N2].get(ids=[first])["metadatas"][0]["last_used"] == NOW + 5 * DAY

    run(tmp_path, body, embedder=real)


# -- recall ranking through the store ----------------------------------------------------
def test_lesson_that_led_to_a_fix_outranks_a_closer_one_that_did_not(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"q": unit(1), "worked": unit(0.8, 0.6), "failed": unit(0.85, -0.527)})

    async def body(mem: ChromaMemory) -> list[str]:
        await lesson(mem, "worked", {}, success=True, now=NOW)
        await lesson(mem, "failed", {}, success=False, now=NOW)
        return [h.text for h in await mem.recall("q", budget_tokens=1000, now=NOW)]

    assert run(tmp_path, body, embedder=emb) == ["worked", "failed"]


def test_old_observation_decays_below_a_fresh_one(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"q": unit(1), "old": unit(0.95, 0.312), "fresh": unit(0.7, 0.714)})

    async def body(mem: ChromaMemory) -> list[str]:
        await observe(mem, "old", {"ts": NOW - 3 * DAY})
        await observe(mem, "fresh", {"ts": NOW - 60})
        return [h.text for h in await mem.recall("q", budget_tokens=1000, now=NOW)]

    assert run(tmp_path, body, embedder=emb) == ["fresh", "old"]


def test_recall_packs_the_best_items_into_the_token_budget(tmp_path: Path) -> None:
    texts = {f"item {i} " + "x" * 60: unit(1 - i / 20, (1 - (1 - i / 20) ** 2) ** 0.5) for i in range(6)}
    emb = ScriptedEmbedder({"q": unit(1), **texts})

    async def body(mem: ChromaMemory) -> list[str]:
        for t in texts:
            await episode(mem, t, {"ts": NOW})
        return [h.text[:6] for h in await mem.recall("q", budget_tokens=60, now=NOW)]  # 25 tokens each

    assert run(tmp_path, body, embedder=emb) == ["item 0", "item 1"]


def test_recall_uses_one_query_embedding_for_all_tiers(tmp_path: Path) -> None:
    emb = ScriptedEmbedder()

    async def body(mem: ChromaMemory) -> None:
        await episode(mem, "e", {})
        emb.calls.clear()
        await mem.recall("query", budget_tokens=100)

    run(tmp_path, body, embedder=emb)
    assert emb.calls == [["query"]]


def test_search_filters_by_tier_and_scores_by_similarity(tmp_path: Path) -> None:
    emb = ScriptedEmbedder({"q": unit(1), "a": unit(0.6, 0.8), "b": unit(0.8, 0.6)})

    async def body(mem: ChromaMemory) -> None:
        await episode(mem, "a", {})
        await lesson(mem, "b", {}, success=True)
        all_hits = await mem.search("q")
        assert [(h.text, round(h.score, 3)) for h in all_hits] == [("b", 0.8), ("a", 0.6)]
        assert [h.text for h in await mem.search("q", tier=Tier.N1)] == ["a"]
        assert "n2" in format_hits(all_hits) and hits_to_json(all_hits)[0]["tier"] == "n2"

    run(tmp_path, body, embedder=emb)


# -- retention -----------------------------------------------------------------------------
@pytest.mark.slow
def test_ttl_then_max_items_for_observations_and_episodes(tmp_path: Path) -> None:
    cfg = MemoryConfig(n0=Retention(ttl_days=7, max_items=10), n1=Retention(ttl_days=90, max_items=10))

    async def body(mem: ChromaMemory) -> None:
        for i in range(3):
            await observe(mem, f"expired {i}", {"ts": NOW - 8 * DAY - i})
            await episode(mem, f"expired ep {i}", {"ts": NOW - 91 * DAY - i})
        for i in range(12):
            await observe(mem, f"kept obs {i}", {"ts": NOW - 100 * (12 - i)})
            await episode(mem, f"kept ep {i}", {"ts": NOW - 100 * (12 - i)})
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
        await lesson(mem, "stale", {}, success=True, now=NOW - 40 * DAY)
        await lesson(mem, "old but recalled", {}, success=True, now=NOW - 40 * DAY)
        mem._cols[Tier.N2].update(ids=[(await mem.search("old but recalled", k=1))[0].id],
                                  metadatas=[{"last_used": NOW - DAY}])
        assert await mem.prune(now=NOW) == {"n0": 0, "n1": 0, "n2": 1}
        assert mem._cols[Tier.N2].get()["documents"] == ["old but recalled"]

    run(tmp_path, body, cfg=cfg, embedder=ScriptedEmbedder())


@pytest.mark.slow
def test_n2_over_max_items_evicts_least_useful_then_least_recently_used(tmp_path: Path) -> None:
    cfg = MemoryConfig(n2=Retention(ttl_days=None, max_items=10))

    async def body(mem: ChromaMemory) -> None:
        for i in range(9):
            await lesson(mem, f"useful {i}", {}, success=True, now=NOW - i)
        await lesson(mem, "useless, used recently", {}, success=False, now=NOW)
        await lesson(mem, "useless, used long ago", {}, success=False, now=NOW - 10 * DAY)
        await lesson(mem, "useless, used long ago", {}, success=False, now=NOW - 10 * DAY)  # merged
        assert counts(await mem.stats())["n2"] == 11
        assert await mem.prune(now=NOW) == {"n0": 0, "n1": 0, "n2": 1}
        docs = mem._cols[Tier.N2].get()["documents"]
        assert "useless, used long ago" not in docs and "useless, used recently" in docs

    run(tmp_path, body, cfg=cfg, embedder=ScriptedEmbedder())


# -- modes, stats, settings --------------------------------------------------------------
def test_read_only_store_refuses_writes_and_does_not_mark_lessons_used(tmp_path: Path) -> None:
    emb = ScriptedEmbedder()

    async def seed(mem: ChromaMemory) -> None:
        await lesson(mem, "lesson", {}, success=True, now=NOW)

    async def look(mem: ChromaMemory) -> None:
        with pytest.raises(MemoryReadOnly):
            await observe(mem, "x", {})
        with pytest.raises(MemoryReadOnly):
            await mem.mark_used({"x": NOW})
        with pytest.raises(MemoryReadOnly):
            await lesson(mem, "y", {}, success=True)
        with pytest.raises(MemoryReadOnly):
            await mem.prune()
        assert await mem.prune(dry_run=True) == {"n0": 0, "n1": 0, "n2": 0}
        [hit] = await mem.recall("lesson", budget_tokens=100, now=NOW + DAY)
        assert hit.metadata["last_used"] == NOW

    run(tmp_path, seed, embedder=emb)
    run(tmp_path, look, embedder=emb, read_only=True)


def test_stats_reports_counts_time_range_and_disk_size(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> dict[str, Any]:
        await episode(mem, "a", {"ts": NOW - 10})
        await episode(mem, "b", {"ts": NOW})
        return await mem.stats()

    stats = run(tmp_path, body, embedder=ScriptedEmbedder())
    n1 = stats["tiers"]["n1"]
    assert n1 == {"collection": "mem_n1", "count": 2, "own": 2, "oldest_ts": NOW - 10, "newest_ts": NOW,
                  "spooled": 0, "dropped": 0}
    assert stats["tiers"]["n0"]["oldest_ts"] is None and stats["instance"] == "a" * 16
    assert stats["mode"] == "embedded" and stats["disk_bytes"] > 0
    text = format_stats(stats)
    assert "mem_n1" in text and "2023-11-14" in text


def test_embedded_client_has_telemetry_off(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> bool:
        return bool(mem._client.get_settings().anonymized_telemetry)

    assert run(tmp_path, body, embedder=ScriptedEmbedder()) is False


def test_use_mark_of_a_lesson_deleted_after_recall_is_dropped_quietly(tmp_path: Path) -> None:
    async def body(mem: ChromaMemory) -> None:
        gone = await lesson(mem, "gone", {}, success=True, now=NOW)
        kept = await lesson(mem, "kept", {}, success=True, now=NOW)
        assert {h.id for h in await mem.recall("gone", budget_tokens=100, now=NOW + DAY)} == {gone, kept}
        mem._cols[Tier.N2].delete(ids=[gone])
        await mem.mark_used({gone: NOW + DAY, kept: NOW + DAY})
        assert mem._cols[Tier.N2].get(ids=[kept])["metadatas"][0]["last_used"] == NOW + DAY
        assert mem._cols[Tier.N2].get(ids=[gone])["ids"] == []

    run(tmp_path, body, embedder=ScriptedEmbedder())


def test_stats_count_without_reading_any_item(tmp_path: Path) -> None:
    class Counting:
        def __init__(self, col: Any) -> None:
            self.col, self.reads = col, 0

        def get(self, *a: Any, **kw: Any) -> Any:
            self.reads += 1
            return self.col.get(*a, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.col, name)

    async def body(mem: ChromaMemory) -> tuple[dict[str, int], int]:
        await mem.add(Tier.N0, [(f"i{i}", f"obs {i}", {"ts": NOW + i}) for i in range(50)])
        mem._cols = {t: Counting(c) for t, c in mem._cols.items()}
        stats = await mem.stats()
        return counts(stats), sum(c.reads for c in mem._cols.values())

    n, reads = run(tmp_path, body, embedder=ScriptedEmbedder())
    assert n["n0"] == 50 and reads == 0


@pytest.mark.slow
def test_a_prune_is_many_short_jobs_and_a_recall_meanwhile_does_not_wait_for_it(tmp_path: Path) -> None:
    cfg = MemoryConfig(n0=Retention(ttl_days=1, max_items=50000))

    async def body(mem: ChromaMemory) -> tuple[list[str], dict[str, int]]:
        old = NOW - 3 * DAY
        for start in range(0, 3500, 500):
            await mem.add(Tier.N0, [(f"o{i}", f"obs {i}", {"ts": old}) for i in range(start, start + 500)])
        done: list[str] = []

        async def pruning() -> dict[str, int]:
            removed = await mem.prune(now=NOW)
            done.append("prune")
            return removed

        task = asyncio.create_task(pruning())
        await asyncio.sleep(0)  # the prune has submitted its first job
        await mem.recall("obs 1", budget_tokens=100, now=NOW)
        done.append("recall")
        return done, await task

    done, removed = run(tmp_path, body, cfg=cfg, embedder=ScriptedEmbedder())
    assert done == ["recall", "prune"] and removed["n0"] == 3500
