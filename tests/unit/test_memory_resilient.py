"""ResilientMemory over a real embedded chromadb: spool, replay, deadlines, degrade, reconnect.

Outages are scripted at the Store seam (the opener and a wrapper that raises while "down"); a
hung call is a real one: the embedder blocks on the memory thread, so the real deadline fires.
Hang guards only, no timing assertions.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from autod.config.settings import MemoryConfig
from autod.memory import Tier
from autod.memory.identity import Identity
from autod.memory.resilient import DEGRADED, OK, REFUSALS_BEFORE_DROP, MemoryUnavailable, ResilientMemory
from autod.memory.spool import FILE_NAME
from autod.memory.store import ChromaMemory

T = TypeVar("T")
GUARD = 30.0  # hang guard for waits, never a performance bound
FAST = {"retry_min_s": 0.05, "retry_max_s": 0.2, "timeout_s": 1.0, "min_similarity": 0}  # toy vectors


class Embedder:
    """Stable word-hash vectors; `hang` blocks the (memory) thread, `poison` refuses a text."""

    dim = 8

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.hang = False
        self.release = threading.Event()
        self.poison: set[str] = set()

    def load(self) -> None: ...

    def embed(self, texts: list[str]) -> list[list[float]]:
        if self.hang:
            self.release.wait(GUARD)
        if self.poison & set(texts):
            raise ValueError("the store refuses this item")
        self.calls.append(list(texts))
        out = []
        for t in texts:  # a bag of words: texts that share a word are similar
            v = np.zeros(self.dim) + 1e-3
            for word in t.split() or [""]:
                seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
                v += np.abs(np.random.default_rng(seed).standard_normal(self.dim))
            out.append((v / np.linalg.norm(v)).tolist())
        return out


class Flaky:
    """The Store seam: a real ChromaMemory, or ConnectionError from every call while `down`."""

    def __init__(self, inner: ChromaMemory, world: World) -> None:
        self.inner, self.world = inner, world
        self.location = inner.location

    @property
    def cfg(self) -> MemoryConfig:
        return self.inner.cfg

    @cfg.setter
    def cfg(self, value: MemoryConfig) -> None:
        self.inner.cfg = value

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(attr) or name == "close":  # local resources are always freed
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.world.down:
                raise ConnectionError("Connection refused")
            self.world.calls.append(name)
            return await attr(*args, **kwargs)

        return call


class World:
    def __init__(self, state: Path, *, down: bool = False) -> None:
        self.state, self.down = state, down
        self.embedder = Embedder()
        self.opens = 0
        self.calls: list[str] = []

    async def open(self, cfg: MemoryConfig, token: str | None) -> Any:
        self.opens += 1
        if self.down:
            raise ConnectionError("Chroma server http://127.0.0.1:9 unreachable: ConnectError")
        who = Identity("b" * 16, "/ws")
        inner = await ChromaMemory.open(cfg, self.state, embedder=self.embedder, who=who, spool=self.spool)
        return Flaky(inner, self)

    spool: Any = None


async def started(world: World, **cfg: Any) -> ResilientMemory:
    mem = await ResilientMemory.start(MemoryConfig(**{**FAST, **cfg}), world.state, workspace="/ws",
                                      opener=world.open)
    world.spool = mem._spool  # the store tallies into the daemon's ledger, as in production
    return mem


async def until(what: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not what():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), GUARD)


def run(body: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(body())


def store_docs(state: Path, tier: Tier) -> list[str]:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=str(state / "memory"), settings=settings)
    got = client.get_collection(f"mem_{tier.value}").get(include=["documents", "metadatas"])
    pairs = sorted(zip(got["metadatas"], got["documents"], strict=True), key=lambda p: p[0]["ts"])
    return [d for _, d in pairs]


# -- outages ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_writes_while_the_store_is_down_are_spooled_and_replayed_in_order_when_it_returns(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, down=True)

    async def body() -> None:
        mem = await started(world)
        assert not await mem.wait_open(GUARD)  # the first attempt failed: start-up goes on
        assert mem.state == DEGRADED and "unreachable" in (mem.why or "")
        summary = mem.summary()
        assert summary.startswith("degraded (Chroma server http://127.0.0.1:9 unreachable")
        assert "since " in summary
        for i in range(3):
            await mem.observe(f"obs {i}", {"ts": 1000.0 + i})
        await mem.add_episode("episode", {"ts": 1010.0}, defer=True)
        assert await mem.add_lesson("lesson", {"ts": 1020.0}, success=True) == ""  # not written yet
        assert await mem.recall("obs", budget_tokens=500) == []  # the cycle goes on without memory
        assert mem.status()["spooled"] == 5 and "5 writes spooled" in mem.summary()
        with pytest.raises(MemoryUnavailable, match="degraded"):
            await mem.search("obs")
        world.down = False  # the server is back: the connector finds it by itself
        await until(lambda: mem.state == OK)
        await mem.flush()
        assert mem.status()["spooled"] == 0
        # replayed in the order accepted: all observations, then the episode, then the lesson
        assert [c for c in world.calls if c in ("add", "add_lesson")] == ["add", "add", "add_lesson"]
        hits = await mem.recall("lesson", budget_tokens=1000)
        assert {h.text for h in hits} >= {"lesson", "episode"}
        await mem.close()

    run(body)
    assert store_docs(tmp_path, Tier.N0) == ["obs 0", "obs 1", "obs 2"]
    assert store_docs(tmp_path, Tier.N1) == ["episode"] and store_docs(tmp_path, Tier.N2) == ["lesson"]


@pytest.mark.slow
def test_a_store_that_dies_mid_run_degrades_and_recovers_with_nothing_lost(tmp_path: Path) -> None:
    world = World(tmp_path)

    async def body() -> None:
        mem = await started(world)
        assert await mem.wait_open(GUARD)
        await mem.observe("before", {"ts": 1.0})
        await mem.flush()
        world.down = True
        await mem.observe("during", {"ts": 2.0})
        await mem.add_episode("episode during", {"ts": 3.0}, defer=True)
        await until(lambda: mem.state == DEGRADED)
        assert "Connection refused" in (mem.why or "") or "unreachable" in (mem.why or "")
        world.down = False
        await until(lambda: mem.state == OK)
        await mem.flush()
        assert world.opens >= 2  # the store was reopened, not reused
        await mem.close()

    run(body)
    assert store_docs(tmp_path, Tier.N0) == ["before", "during"] and store_docs(tmp_path, Tier.N1) == [
        "episode during"]


@pytest.mark.slow
def test_a_hung_store_call_hits_its_deadline_and_nothing_waits_behind_it(tmp_path: Path) -> None:
    world = World(tmp_path)

    async def body() -> None:
        mem = await started(world, timeout_s=0.5, retry_min_s=0.05)
        assert await mem.wait_open(GUARD)
        world.embedder.hang = True  # the next write blocks the memory thread until released
        await mem.add_episode("stuck", {"ts": 1.0}, defer=True)
        await until(lambda: mem.state == DEGRADED)
        assert await mem.recall("stuck", budget_tokens=100) == []  # at once, not behind the hang
        await mem.observe("accepted meanwhile", {"ts": 2.0})
        await asyncio.sleep(0.5)  # backoff rounds pass: no second thread is started beside the stuck one
        assert mem.state == DEGRADED and world.opens == 1 and "still stuck" in (mem.why or "")
        world.embedder.hang = False
        world.embedder.release.set()  # the stuck call returns: a fresh thread takes over
        await until(lambda: mem.state == OK)
        await mem.flush()
        world.embedder.release.clear()
        world.embedder.hang = True
        await mem.observe("stuck at the stop", {})
        await mem.flush()  # waits for the deadline; then the memory is degraded, not wedged
        assert mem.state == DEGRADED
        await asyncio.wait_for(mem.close(), GUARD)  # never waits for the stuck thread
        world.embedder.release.set()

    run(body)
    assert store_docs(tmp_path, Tier.N1) == ["stuck"]  # written once, though replayed after the timeout
    assert store_docs(tmp_path, Tier.N0)[0] == "accepted meanwhile"
    left = sqlite3.connect(tmp_path / FILE_NAME).execute("SELECT text FROM spool").fetchall()
    assert left == [("stuck at the stop",)]  # kept: replayed (an idempotent upsert) at the next start


def test_spooled_writes_survive_a_restart_and_reach_the_store_at_the_next_start(tmp_path: Path) -> None:
    async def first() -> None:
        mem = await started(World(tmp_path, down=True))
        await mem.wait_open(GUARD)
        await mem.add_lesson("learnt offline", {"ts": 5.0}, success=True, defer=True)
        await mem.close()

    async def second() -> None:
        world = World(tmp_path)
        mem = await started(world)
        assert await mem.wait_open(GUARD)
        await mem.flush()
        assert mem.status()["spooled"] == 0
        await mem.close()

    run(first)
    assert (tmp_path / FILE_NAME).stat().st_mode & 0o777 == 0o600
    run(second)
    assert store_docs(tmp_path, Tier.N2) == ["learnt offline"]


def test_reload_retries_a_degraded_store_at_once_instead_of_waiting_out_the_backoff(tmp_path: Path) -> None:
    world = World(tmp_path, down=True)

    async def body() -> None:
        mem = await started(world, retry_min_s=300, retry_max_s=600)
        await mem.wait_open(GUARD)
        assert mem.state == DEGRADED
        world.down = False
        mem.reload(mem.cfg, token=None)  # SIGHUP
        await until(lambda: mem.state == OK)
        await mem.close()

    run(body)


def test_full_spool_drops_the_least_valuable_writes_first_and_counts_them_per_tier(tmp_path: Path) -> None:
    world = World(tmp_path, down=True)

    async def body() -> None:
        mem = await started(world, spool_max_items=100)
        await mem.wait_open(GUARD)
        await mem.add_lesson("keep me", {}, success=False, defer=True)
        await mem.add_episode("keep me too", {}, defer=True)
        for i in range(110):
            await mem.observe(f"obs {i}", {})
        status = mem.status()
        assert status["spooled"] == 100
        assert status["dropped"] == {"n0": 12, "n1": 0, "n2": 0, "used": 0}
        assert "12 dropped" in mem.summary()
        stats = await mem.stats()  # from the ledger while the store is away
        assert stats["tiers"]["n0"]["dropped"] == 12 and stats["tiers"]["n2"]["spooled"] == 1
        assert stats["tiers"]["n0"]["count"] is None and stats["state"] == DEGRADED
        await mem.close()

    run(body)


@pytest.mark.slow
def test_a_write_the_reachable_store_keeps_refusing_is_dropped_counted_and_the_rest_flow(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    world.embedder.poison = {"poison"}

    async def body() -> None:
        mem = await started(world, retry_min_s=0.05)
        assert await mem.wait_open(GUARD)
        await mem.add_episode("poison", {"ts": 1.0}, defer=True)
        await mem.add_episode("fine", {"ts": 2.0}, defer=True)
        await mem.flush()
        assert mem.state == OK and mem.status()["dropped"]["n1"] == 1
        await mem.close()

    run(body)
    assert store_docs(tmp_path, Tier.N1) == ["fine"]
    assert REFUSALS_BEFORE_DROP > 1


# -- the write path ----------------------------------------------------------------------------
@pytest.mark.slow
def test_observations_are_written_in_the_background_in_batches_of_at_most_64(tmp_path: Path) -> None:
    world = World(tmp_path)

    async def body() -> None:
        mem = await started(world)
        assert await mem.wait_open(GUARD)
        await mem.observe("alone", {})
        await until(lambda: mem.status()["spooled"] == 0)  # no flush: the writer's interval
        for i in range(150):
            await mem.observe(f"obs {i}", {})
        await mem.flush()
        await mem.close()

    run(body)
    sizes = [len(c) for c in world.embedder.calls]
    assert sizes[0] == 1 and sum(sizes) == 151 and max(sizes) <= 64


def test_recall_sees_the_deferred_episode_and_lesson_of_the_cycle_before(tmp_path: Path) -> None:
    world = World(tmp_path)

    async def body() -> tuple[set[str], list[str]]:
        mem = await started(world)
        assert await mem.wait_open(GUARD)
        assert await mem.add_lesson("lesson", {"fingerprint": "fp"}, success=True, defer=True) == ""
        await mem.add_episode("episode", {"status": "fixed"}, defer=True)
        recalled = {h.text for h in await mem.recall("lesson episode", budget_tokens=1000)}
        found = [h.text for h in await mem.search("lesson", tier=Tier.N2)]
        await mem.close()
        return recalled, found

    recalled, found = run(body)
    assert recalled == {"lesson", "episode"} and found == ["lesson"]


def test_a_recalled_lesson_is_marked_used_through_the_spool(tmp_path: Path) -> None:
    world = World(tmp_path)

    async def body() -> float:
        mem = await started(world)
        assert await mem.wait_open(GUARD)
        lesson = await mem.add_lesson("lesson", {}, success=True, now=100.0)
        [hit] = await mem.recall("lesson", budget_tokens=100, now=5000.0)
        assert hit.id == lesson
        await mem.flush()
        [found] = await mem.search("lesson")
        await mem.close()
        return float(found.metadata["last_used"])

    assert run(body) == 5000.0


def test_start_up_waits_for_the_first_attempt_only_and_keeps_systemd_informed(tmp_path: Path) -> None:
    world = World(tmp_path)
    extended: list[float] = []

    async def body() -> None:
        mem = await started(world)
        assert await mem.wait_open(GUARD, extended.append)
        assert mem.summary() == "ok"
        await mem.close()
        assert mem.state == "closed"

    run(body)
    assert extended and all(s > 0 for s in extended)


@pytest.mark.slow
def test_a_slow_first_open_keeps_extending_the_start_timeout_over_sd_notify(tmp_path: Path) -> None:
    import socket

    from autod.runtime.notify import Notifier

    path = str(tmp_path / "notify.sock")
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(path)
    sink.settimeout(GUARD)
    world = World(tmp_path)

    async def slow_open(cfg: MemoryConfig, token: str | None) -> Any:
        await asyncio.sleep(0.3)  # a store that takes its time (a large index, a slow server)
        return await world.open(cfg, token)

    async def body() -> bool:
        mem = await ResilientMemory.start(MemoryConfig(**FAST), tmp_path, workspace="/ws", opener=slow_open)
        world.spool = mem._spool
        ok = await mem.wait_open(GUARD, Notifier({"NOTIFY_SOCKET": path}).extend_timeout)
        await mem.close()
        return ok

    try:
        assert run(body)
        message = sink.recv(4096).decode()
    finally:
        sink.close()
    assert message.startswith("EXTEND_TIMEOUT_USEC=") and int(message.split("=")[1]) >= 10_000_000


def test_a_spool_that_cannot_be_written_fails_no_cycle_and_counts_the_loss(tmp_path: Path) -> None:
    world = World(tmp_path, down=True)

    async def body() -> None:
        mem = await started(world)
        await mem.wait_open(GUARD)
        mem._spool._db.execute("PRAGMA query_only = ON")  # as a full disk or a read-only file would
        assert await mem.observe("lost", {}) != ""  # the cycle that observes goes on
        assert await mem.add_lesson("lost too", {}, success=True) == ""
        assert mem.status()["dropped"]["n0"] == 1 and mem.status()["dropped"]["n2"] == 1
        mem._spool._db.execute("PRAGMA query_only = OFF")
        await mem.close()

    run(body)


def test_the_embedding_model_is_loaded_once_the_store_opens_before_any_recall(tmp_path):
    """The local model loads on first use: the first cycle's recall paid for it (half a second of
    autod's own time). It is loaded as soon as the store is open, in the background; a model that
    fails to load is logged and leaves the memory as it was."""
    world = World(tmp_path)
    loads: list[int] = []
    world.embedder.load = lambda: loads.append(1)  # type: ignore[attr-defined]

    async def body() -> None:
        mem = await started(world)
        try:
            await until(lambda: loads == [1])
            assert world.embedder.calls == []  # nothing was embedded for it
        finally:
            await mem.close()

    run(body)

    def broken() -> None:
        raise RuntimeError("embedding model checksum mismatch")

    world = World(tmp_path / "again")
    world.embedder.load = broken  # type: ignore[attr-defined]

    async def still_open() -> None:
        mem = await started(world)
        try:
            await until(lambda: all(t.done() for t in mem._tasks if t.get_name() == "memory-warmup"))
            assert mem.state == OK
            await mem.observe("a failure", {"kind": "x"})
        finally:
            await mem.close()

    run(still_open)
