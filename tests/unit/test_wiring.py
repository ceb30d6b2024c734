"""The daemon's wiring is one value: a reload replaces it whole, an event in flight finishes on the wiring
it started on (its planner, its gate, its retry policy), the next event runs on the new one, the planner
of a replaced wiring is closed only once nothing runs on it, and a refused reload leaves it as it was."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from autod import logs
from autod.config.settings import load_config
from autod.cycle.deps import CycleDeps
from autod.daemon.supervisor import Daemon
from autod.errors import LLMUnavailable
from autod.events import Event, EventKind, fingerprint
from autod.modes import Mode
from autod.plan import Plan
from autod.reflection import Reflection
from autod.runtime import dispatch

GUARD = 30.0  # hang guard for waits, never a performance bound
NOBODY = "http://127.0.0.1:9/v1"  # an LLM planner is built, and nothing is ever asked of it


def write_config(path: Path, ws: Path, *, retry_base_s: float, llm: str = NOBODY) -> Path:
    path.write_text(
        f"workspace: {ws}\n"
        f"llm: {{base_url: '{llm}'}}\n"
        f"limits: {{retry_base_s: {retry_base_s}, retry_max_s: 86400, min_interval_s: 0}}\n"
        "modes: {auto-debug: {enabled: true}}\n"
    )
    return path


class WatchedLock(asyncio.Lock):
    """The workspace lock, counting who asked for it (a test waits until a task queued for it)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    async def acquire(self) -> bool:
        self.asked += 1
        return await super().acquire()


class Ran:
    """What each cycle ran on: its planner, its gate, and whether that planner was already closed."""

    def __init__(self) -> None:
        self.cycles: list[tuple[Any, Any, bool]] = []
        self.made = 0  # cycles constructed: the next thing each does is wait for the workspace lock


def fake_cycle(ran: Ran) -> type:
    class Cycle:
        """A cycle that records what it was given and ends as an LLM outage (the retry policy decides)."""

        def __init__(
            self, deps: CycleDeps, mode: Mode, event: Event, *, approved: Plan | None = None
        ) -> None:
            self.deps = deps
            self.r = Reflection(cycle_id=uuid.uuid4().hex[:12], event_id=event.id, mode=mode.name,
                                fingerprint=event.fingerprint, kind=str(event.kind), summary=event.summary,
                                planner=deps.planner_name)
            self.error: LLMUnavailable | None = None
            ran.made += 1

        async def run(self) -> Reflection:
            planner = self.deps.planner.inner  # type: ignore[attr-defined]  # the metered planner's
            ran.cycles.append((planner, self.deps.gate, planner._primary.client.is_closed))
            self.error = LLMUnavailable("the LLM is down")
            self.r.status, self.r.reason = "failed", self.error.reason
            return self.r

    return Cycle


def manual(n: int) -> Event:
    return Event(source="manual", kind=EventKind.MANUAL, summary=f"manual trigger {n} of auto-debug",
                 payload={"mode": "auto-debug", "paths": [], "message": f"go {n}"},
                 fingerprint=fingerprint("manual", "auto-debug", str(n), exact=[uuid.uuid4().hex]))


async def until(what: Any) -> None:
    async def poll() -> None:
        while not what():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), GUARD)


def deferred_by(d: Daemon, event: Event) -> float:
    """How long the retry policy deferred `event` for."""
    (row,) = [r for r in d.queue.retrying(100) if r["id"] == event.id]
    return float(row["not_before"]) - time.time()


@contextlib.asynccontextmanager
async def opened(config: Path) -> AsyncIterator[Daemon]:
    """A daemon opened on `config` (no memory, no task started): its dispatcher is driven by hand."""
    d = Daemon(load_config(config), config)
    d.workspace_lock = WatchedLock()
    await d._open()
    try:
        yield d
    finally:
        await d.sources.stop()
        if d._ready is not None:
            d._ready.cancel()
        await d._close()


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ran]:
    async def no_memory(self: Daemon) -> None:
        return None

    monkeypatch.setattr(Daemon, "_open_memory", no_memory)
    ran = Ran()
    monkeypatch.setattr(dispatch, "Cycle", fake_cycle(ran))
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    yield ran
    logs.configure_logging(file=None, stderr=False)  # a reload installed the config's handlers
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    logs.set_secrets([])


@pytest.fixture
def config(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return write_config(tmp_path / "autod.yaml", ws, retry_base_s=100)


def test_an_event_in_flight_keeps_its_wiring_through_a_reload_and_the_next_one_runs_on_the_new(ran, config):
    async def scenario() -> None:
        async with opened(config) as d:
            old = d.wiring
            lock: WatchedLock = d.workspace_lock  # type: ignore[assignment]
            await lock.acquire()  # a check runs: the reload and the event's cycle both wait for it
            write_config(config, old.settings.workspace, retry_base_s=3000)
            reload = asyncio.create_task(d.reload())
            await until(lambda: lock.asked == 2)  # the reload has loaded the new config and waits first
            first = manual(1)
            await d.queue.aput(first)
            handled = asyncio.create_task(d.dispatcher.handle(await d.queue.alease()))
            await until(lambda: ran.made == 1)  # leased, admitted and its cycle made on the old wiring
            assert lock.asked == 3
            lock.release()
            await asyncio.wait_for(reload, GUARD)
            new = d.wiring
            assert new is not old and new.settings.limits.retry_base_s == 3000
            assert d.dispatcher.in_use.held(old)  # replaced, not closed: the event still runs on it
            assert not old.planner._primary.client.is_closed  # type: ignore[attr-defined]
            assert await asyncio.wait_for(handled, GUARD)
            # the whole event ran on the old wiring: its planner (still open), its gate, its retry policy
            assert ran.cycles == [(old.planner, old.gate, False)]
            assert 50 < deferred_by(d, first) <= 120
            await until(lambda: old.planner._primary.client.is_closed)  # closed once nothing held it
            second = manual(2)
            await d.queue.aput(second)
            assert await d.dispatcher.handle(await d.queue.alease())
            assert ran.cycles[1] == (new.planner, new.gate, False)
            assert deferred_by(d, second) > 2000
            assert not new.planner._primary.client.is_closed  # type: ignore[attr-defined]

    asyncio.run(scenario())


@pytest.mark.parametrize("change", ["invalid", "workspace"])
def test_a_refused_reload_leaves_the_wiring_as_it_was(ran, config, tmp_path, change):
    async def scenario() -> None:
        async with opened(config) as d:
            before = d.wiring
            if change == "invalid":
                write_config(config, before.settings.workspace, retry_base_s=-1)
            else:
                other = tmp_path / "other"
                other.mkdir()
                write_config(config, other, retry_base_s=3000)
            await d.reload()
            assert d.wiring is before
            assert not d.dispatcher.in_use.held(before)
            await asyncio.sleep(0.05)  # a retired wiring would be closing now
            assert not before.planner._primary.client.is_closed  # type: ignore[attr-defined]

    asyncio.run(scenario())
