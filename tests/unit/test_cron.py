"""Cron source through APScheduler's own behaviour, driven by fast triggers through the seam."""

from __future__ import annotations

import asyncio
import warnings
from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger

from autod.config.settings import CronSource as CronConfig
from autod.events import EventKind
from autod.sources.cron import CronSource, cron_ticks, trigger_ticks

HANG_GUARD_S = 10.0


class PastTimes(BaseTrigger):
    """A trigger whose fire times all lie in the past: a backlog as after a suspend."""

    def __init__(self, times: list[datetime]) -> None:
        self.times = sorted(times)

    def get_next_fire_time(self, previous_fire_time, now):
        return next((t for t in self.times if previous_fire_time is None or t > previous_fire_time), None)


async def collect(gen, seconds: float) -> list[datetime]:
    """Ticks yielded within `seconds` (an observation window, not a speed assertion)."""
    out: list[datetime] = []

    async def pump() -> None:
        async for t in gen:
            out.append(t)

    task = asyncio.create_task(pump())
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return out


@pytest.mark.slow
def test_per_second_trigger_fires_a_schedule_event():
    cfg = CronConfig(type="cron", name="nightly", schedule="0 3 * * mon-fri", mode="auto-plan")

    async def main() -> None:
        source = CronSource(cfg, trigger=CronTrigger(second="*", timezone="UTC"))
        gen = source.events()
        ev = await asyncio.wait_for(anext(gen), HANG_GUARD_S)
        await gen.aclose()
        assert ev.kind is EventKind.SCHEDULE and ev.source == "cron:nightly"
        assert ev.summary == "schedule 0 3 * * mon-fri for auto-plan"
        assert ev.payload["mode"] == "auto-plan"
        assert datetime.fromisoformat(ev.payload["scheduled_for"]).microsecond == 0  # the scheduled second
        again = CronSource(cfg).events()
        await again.aclose()

    asyncio.run(main())


@pytest.mark.slow
def test_run_time_past_grace_is_skipped_and_within_grace_runs():
    async def main() -> None:
        past = datetime.now(UTC) - timedelta(seconds=20)
        missed = await collect(trigger_ticks(DateTrigger(past), misfire_grace_s=5), 0.5)
        assert missed == []
        ran = await collect(trigger_ticks(DateTrigger(past), misfire_grace_s=60), 0.5)
        assert len(ran) == 1

    asyncio.run(main())


@pytest.mark.slow
def test_backlog_within_grace_coalesces_into_one_run():
    async def main() -> None:
        now = datetime.now(UTC)

        def trigger() -> PastTimes:
            return PastTimes([now - timedelta(seconds=s) for s in (50, 40, 30, 20, 10)])

        coalesced = await collect(trigger_ticks(trigger(), misfire_grace_s=60, coalesce=True), 0.5)
        assert len(coalesced) == 1
        each = await collect(trigger_ticks(trigger(), misfire_grace_s=60, coalesce=False), 0.5)
        assert len(each) == 5
        assert coalesced == [max(each)]

    asyncio.run(main())


@pytest.mark.slow
def test_cron_ticks_accepts_crontab_and_cancels_cleanly():
    async def main() -> None:
        ticks = await collect(cron_ticks("* * * * *", timezone="Europe/Paris"), 0.2)
        assert ticks == []  # nothing due in 0.2 s; the point is a clean stop

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "event loop is closed" and similar would fail here
        asyncio.run(main())


def test_the_source_is_armed_once_its_job_is_scheduled():
    cfg = CronConfig(type="cron", name="nightly", schedule="0 3 * * mon-fri", mode="auto-plan")

    async def main() -> None:
        source = CronSource(cfg)
        assert not source.armed.is_set()
        gen = source.events()
        pending = asyncio.ensure_future(anext(gen))
        await asyncio.wait_for(source.armed.wait(), HANG_GUARD_S)
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)
        await gen.aclose()

    asyncio.run(main())


def test_a_stop_right_after_a_backlog_waits_for_its_runs_and_leaves_no_task_behind():
    import structlog.testing

    async def main() -> None:
        now = datetime.now(UTC)
        backlog = PastTimes([now - timedelta(seconds=s) for s in (50, 40, 30, 20, 10)])
        armed = asyncio.Event()
        gen = trigger_ticks(backlog, misfire_grace_s=60, coalesce=False, armed=armed)
        first = await asyncio.wait_for(anext(gen), HANG_GUARD_S)
        assert armed.is_set() and first == min(backlog.times)
        with structlog.testing.capture_logs() as logs:
            await asyncio.wait_for(gen.aclose(), HANG_GUARD_S)
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == []  # no run was given up on
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asyncio.run(main())
