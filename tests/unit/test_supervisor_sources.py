"""A crashed source is restarted with backoff; one that keeps crashing is disabled with an error line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import structlog

from autod.events import Event, EventKind
from autod.runtime import sourceset
from autod.runtime.sourceset import SourceSet, SourceState


class Crashing:
    def __init__(self, runs: list[int], crash_after: int) -> None:
        self.runs = runs
        self.crash_after = crash_after
        self.name = "crashing"
        self.armed = asyncio.Event()

    async def events(self):
        self.runs.append(1)
        for i in range(self.crash_after):
            yield Event(source="test", kind=EventKind.SCHEDULE, summary=f"e{i}", fingerprint=f"f{i}")
        raise RuntimeError("source bug")


def daemon(tmp_path: Path) -> SourceSet:
    accepted: list[Event] = []

    async def accept(event: Event) -> None:
        accepted.append(event)

    d = SourceSet(accept)
    d.accepted = accepted  # type: ignore[attr-defined]
    return d


@pytest.mark.slow
def test_a_crashing_source_is_restarted_with_backoff_then_disabled(tmp_path, monkeypatch):
    monkeypatch.setattr(sourceset, "RESTART_BASE_S", 0.01)
    d = daemon(tmp_path)
    runs: list[int] = []
    st = SourceState("crashing", "test")
    with structlog.testing.capture_logs() as logs:
        asyncio.run(asyncio.wait_for(d.run_source(st, lambda: Crashing(runs, 2)), 10))
    assert len(runs) == sourceset.CRASHES_BEFORE_DISABLE
    assert st.state == "disabled" and st.restarts == sourceset.CRASHES_BEFORE_DISABLE - 1
    assert st.last_error == "RuntimeError: source bug"
    assert len(d.accepted) == 2 * sourceset.CRASHES_BEFORE_DISABLE  # events before each crash kept
    warnings = [x for x in logs if x["event"] == "source.crashed"]
    assert [w["in_s"] for w in warnings] == [0.01 * 2**i for i in range(len(warnings))]
    assert any(
        x["event"] == "source.disabled" and x["log_level"] == "error" for x in logs
    )


def test_a_source_that_finishes_is_done_not_restarted(tmp_path):
    d = daemon(tmp_path)

    class Finite:
        name = "finite"

        def __init__(self) -> None:
            self.armed = asyncio.Event()

        async def events(self):
            yield Event(source="t", kind=EventKind.SCHEDULE, summary="x", fingerprint="x")

    st = SourceState("finite", "test")
    asyncio.run(asyncio.wait_for(d.run_source(st, Finite), 5))
    assert st.state == "done" and st.events == 1 and st.restarts == 0


def test_status_says_a_source_is_armed_only_once_it_says_so(tmp_path):
    d = daemon(tmp_path)
    go = asyncio.Event()

    class Slow:
        def __init__(self) -> None:
            self.armed = asyncio.Event()

        async def events(self):
            await go.wait()
            self.armed.set()  # watching from here on
            await asyncio.Event().wait()
            yield  # pragma: no cover

    async def main() -> None:
        d.start([("slow", "test", Slow)])
        await asyncio.sleep(0)
        assert d.states["slow"].state == "running" and d.armed("slow") is False  # running, not yet armed
        go.set()
        for _ in range(100):
            if d.armed("slow"):
                break
            await asyncio.sleep(0.01)
        assert d.armed("slow") is True and d.armed("unknown") is False
        await d.stop()

    asyncio.run(asyncio.wait_for(main(), 10))
