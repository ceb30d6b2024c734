"""A server's measured pace is kept in the state db (autod.runtime.windows.KeptPace): a restart's first
plan is priced at that server's reading/writing ratio, not the order's constant; a record that is old,
corrupt or hand-edited is not believed, and a state db that fails costs nothing but the constant."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from autod.config.settings import LLMConfig
from autod.planner import CHARS_PER_TOKEN, pace
from autod.planner.llm import LLMPlanner
from autod.planner.pace import Speeds
from autod.runtime.windows import PACE_KEEP_S, PACE_KEY, PACE_UNIT, KeptPace
from autod.stores.state import State

URL = "http://127.0.0.1:9/v1"  # nothing listens: no request is made in these tests


def planner(memory: Any) -> LLMPlanner:
    p = LLMPlanner(LLMConfig(base_url=URL, model="m", context_tokens=8192), None)
    p.remember_pace(memory)
    return p


def measure(p: LLMPlanner, read_s: float, write_s: float) -> None:
    for _ in range(pace.ENOUGH):
        p._primary.pace.observe(3000, 1000 * read_s, 300, 100 * write_s)  # 1,000 and 100 tokens


def test_a_pace_measured_before_a_restart_prices_the_first_plan_after_it(tmp_path: Path):
    state = State(tmp_path / "state.db")

    async def go() -> tuple[float | None, float | None, float | None]:
        first = planner(KeptPace(state))
        await first.context_window()
        measure(first, 0.002, 0.040)
        await first._primary.pace.keep()
        measured = first.read_per_generated
        await first.aclose()
        second = planner(KeptPace(state))  # a restart, or a config reload: a new planner
        before = second.read_per_generated  # nothing recalled until the first prompt is sized
        with capture_logs() as logs:
            await second.context_window()
        assert [e["event"] for e in logs if e["event"].startswith("llm.pace")] == ["llm.pace_recalled"]
        after = second.read_per_generated
        await second.aclose()
        return measured, before, after

    measured, before, after = asyncio.run(go())
    assert measured is not None and abs(measured - 0.05) < 1e-9
    assert before is None and after == measured


def test_a_pace_is_kept_again_only_when_it_moved(tmp_path: Path):
    writes: list[Speeds] = []

    class Memory:
        async def recall_pace(self, key: str) -> Speeds | None:
            return None

        async def keep_pace(self, key: str, speeds: Speeds) -> None:
            writes.append(speeds)

    async def go() -> None:
        p = planner(Memory())
        await p.context_window()
        await p._primary.pace.keep()  # nothing measured: nothing kept
        measure(p, 0.002, 0.040)
        await p._primary.pace.keep()
        measure(p, 0.002, 0.040)
        await p._primary.pace.keep()  # the same speeds again
        for _ in range(5):  # now 1 ms and 80 ms: five against four move the medians
            p._primary.pace.observe(3000, 1.0, 300, 8.0)
        await p._primary.pace.keep()
        await p.aclose()

    asyncio.run(go())
    assert writes == [Speeds(0.002, 0.040), Speeds(0.001, 0.080)]


def test_an_old_pace_is_not_recalled(tmp_path: Path):
    state = State(tmp_path / "state.db")
    now = [1_000_000.0]

    async def go() -> list[Speeds | None]:
        memory = KeptPace(state, clock=lambda: now[0])
        await memory.keep_pace("k", Speeds(0.002, 0.04))
        got = [await memory.recall_pace("k")]
        now[0] += PACE_KEEP_S - 1
        got.append(await memory.recall_pace("k"))
        now[0] += 2
        got.append(await memory.recall_pace("k"))
        return got

    assert asyncio.run(go()) == [Speeds(0.002, 0.04), Speeds(0.002, 0.04), None]


def test_a_pace_an_older_autod_kept_in_the_server_s_own_tokens_is_measured_anew(tmp_path: Path):
    """An older autod kept seconds per server token, whose characters differ between a prompt and a reply
    (autod.planner.pace): such a record, without its unit, prices nothing."""
    state = State(tmp_path / "state.db")

    async def go() -> tuple[Speeds | None, Speeds | None]:
        memory = KeptPace(state, clock=lambda: 1_000_100.0)
        await state.call(state.set_kv, PACE_KEY + "k", {"read_s": 0.002, "write_s": 0.04, "at": 1_000_000.0})
        old = await memory.recall_pace("k")
        await memory.keep_pace("k", Speeds(0.002, 0.04))
        return old, await memory.recall_pace("k")

    assert asyncio.run(go()) == (None, Speeds(0.002, 0.04))


def garbage(rng: random.Random) -> Any:
    """A state db record of the pace that no autod wrote: the wrong shape, types or values."""
    values: list[Any] = [None, True, "0.01", [], {}, -1, 0, 1e9, math.nan, math.inf, -math.inf, 1e-12, 61.0]
    doc: dict[str, Any] = {"read_s": 0.002, "write_s": 0.04, "at": 1_000_000.0, PACE_UNIT: CHARS_PER_TOKEN}
    for field in rng.sample(sorted(doc), rng.randint(1, 3)):
        if rng.random() < 0.15:
            del doc[field]
        else:
            doc[field] = rng.choice(values)
    return doc if rng.random() < 0.9 else rng.choice(values)


def test_a_pace_record_nobody_could_have_measured_is_never_believed(tmp_path: Path):
    state = State(tmp_path / "state.db")
    rng = random.Random(11)

    async def go() -> int:
        memory = KeptPace(state, clock=lambda: 1_000_100.0)
        believed = 0
        for _ in range(300):
            doc = garbage(rng)
            await state.call(state.set_kv, PACE_KEY + "k", doc)
            got = await memory.recall_pace("k")
            if got is not None:
                believed += 1
                assert got.plausible(), (doc, got)
                assert isinstance(doc, dict) and got == Speeds(float(doc["read_s"]), float(doc["write_s"]))
                assert 0 <= 1_000_100.0 - doc["at"] < PACE_KEEP_S
                assert doc[PACE_UNIT] == CHARS_PER_TOKEN
            fresh = ratio_seeded(got)
            assert fresh is None or pace.BOUNDS[0] <= fresh <= pace.BOUNDS[1]
        return believed

    assert asyncio.run(go()) < 300  # most of them are garbage


def ratio_seeded(speeds: Speeds | None) -> float | None:
    p = pace.Pace()
    if speeds is not None:
        p.seed(speeds)
    return p.read_per_generated()


@pytest.mark.parametrize("failure", ["raises", "hangs"])
def test_a_state_db_that_fails_leaves_the_constant_and_a_warning(failure: str, monkeypatch):
    monkeypatch.setattr(pace, "WINDOW_MEMORY_S", 0.05)

    class Broken:
        async def recall_pace(self, key: str) -> Speeds | None:
            if failure == "hangs":
                await asyncio.sleep(3600)
            raise OSError("disk I/O error")

        async def keep_pace(self, key: str, speeds: Speeds) -> None:
            if failure == "hangs":
                await asyncio.sleep(3600)
            raise OSError("disk I/O error")

    async def go() -> tuple[float | None, list[str]]:
        p = planner(Broken())
        with capture_logs() as logs:
            assert await p.context_window() == 8192
            measure(p, 0.002, 0.040)
            await p._primary.pace.keep()
        ratio = p.read_per_generated
        await p.aclose()
        return ratio, [e["event"] for e in logs]

    ratio, events = asyncio.run(asyncio.wait_for(go(), 10))  # hang guard only
    assert events == ["llm.pace_not_recalled", "llm.pace_not_kept"]
    assert ratio is not None and abs(ratio - 0.05) < 1e-9  # this run's own measurement still counts
