"""`type: cron`: schedule events from a crontab string (APScheduler 3, AsyncIOScheduler).

The scheduler only hands fire times to an asyncio.Queue; the async iterator turns them into
Events, so a slow consumer never blocks the scheduler and nothing runs half-done on stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime

import structlog
from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger

from autod.config.settings import CronSource as CronConfig
from autod.events import Event, EventKind, fingerprint

log = structlog.get_logger(__name__)

STOP_WAIT_S = 5.0


async def _fired() -> None:
    """The job itself does nothing: its successful execution event carries the scheduled time."""


async def trigger_ticks(
    trigger: BaseTrigger, *, timezone: str = "UTC", misfire_grace_s: int = 300, coalesce: bool = True
) -> AsyncIterator[datetime]:
    """Yield each scheduled fire time of `trigger` (the seam tests drive with fast triggers)."""
    queue: asyncio.Queue[datetime] = asyncio.Queue()
    scheduler = AsyncIOScheduler(timezone=timezone, event_loop=asyncio.get_running_loop())

    def on_executed(event: JobExecutionEvent) -> None:
        # Executed, not submitted: APScheduler decides a misfire inside the executor, after
        # submission. Called on the loop thread (coroutine job), so put_nowait is safe.
        queue.put_nowait(event.scheduled_run_time)

    scheduler.add_listener(on_executed, EVENT_JOB_EXECUTED)
    scheduler.start()
    scheduler.add_job(
        _fired,
        trigger,
        id="tick",
        misfire_grace_time=misfire_grace_s,
        coalesce=coalesce,
        max_instances=1,
    )
    try:
        while True:
            yield await queue.get()
    finally:
        await _stop(scheduler)


async def _stop(scheduler: AsyncIOScheduler) -> None:
    """Pause, let running jobs finish (bounded), then shut down without waiting on the loop."""
    if not scheduler.running:
        return
    scheduler.pause()
    executor = scheduler._lookup_executor("default")
    pending = set(getattr(executor, "_pending_futures", ()))
    if pending:
        with contextlib.suppress(Exception):
            await asyncio.wait(pending, timeout=STOP_WAIT_S)
    scheduler.shutdown(wait=False)


async def cron_ticks(
    expr: str, *, timezone: str = "UTC", misfire_grace_s: int = 300, coalesce: bool = True
) -> AsyncIterator[datetime]:
    """Yield the scheduled time of each firing of a 5-field crontab expression."""
    trigger = CronTrigger.from_crontab(expr, timezone=timezone)
    async for tick in trigger_ticks(
        trigger, timezone=timezone, misfire_grace_s=misfire_grace_s, coalesce=coalesce
    ):
        yield tick


class CronSource:
    """Yields a schedule event addressed to one mode each time the crontab fires."""

    def __init__(self, cfg: CronConfig, *, trigger: BaseTrigger | None = None) -> None:
        self.cfg = cfg
        self._label = cfg.name or cfg.mode
        self.name = f"cron:{self._label}"
        self._trigger = trigger

    async def events(self) -> AsyncIterator[Event]:
        cfg = self.cfg
        trigger = self._trigger or CronTrigger.from_crontab(cfg.schedule, timezone=cfg.timezone)
        ticks = trigger_ticks(
            trigger, timezone=cfg.timezone, misfire_grace_s=cfg.misfire_grace_s, coalesce=cfg.coalesce
        )
        try:
            async for tick in ticks:
                log.debug("cron.fired", source=self.name, scheduled_for=tick.isoformat())
                yield Event(
                    source=self.name,
                    kind=EventKind.SCHEDULE,
                    summary=f"schedule {cfg.schedule} for {cfg.mode}",
                    payload={"mode": cfg.mode, "scheduled_for": tick.isoformat()},
                    fingerprint=fingerprint("schedule", self._label, cfg.mode),
                )
        finally:
            await ticks.aclose()
