"""`type: cron`: schedule events from a crontab string (APScheduler 3, AsyncIOScheduler).

The scheduler only hands fire times to an asyncio.Queue; the async iterator turns them into
Events, so a slow consumer never blocks the scheduler and nothing runs half-done on stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime

import structlog
from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobExecutionEvent,
    JobSubmissionEvent,
)
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
    trigger: BaseTrigger,
    *,
    timezone: str = "UTC",
    misfire_grace_s: int = 300,
    coalesce: bool = True,
    armed: asyncio.Event | None = None,
) -> AsyncIterator[datetime]:
    """Yield each scheduled fire time of `trigger` (the seam tests drive with fast triggers).

    `armed` is set once the job is scheduled."""
    queue: asyncio.Queue[datetime] = asyncio.Queue()
    scheduler = AsyncIOScheduler(timezone=timezone, event_loop=asyncio.get_running_loop())
    runs = _Runs()

    def on_executed(event: JobExecutionEvent) -> None:
        # Executed, not submitted: APScheduler decides a misfire inside the executor, after
        # submission. Called on the loop thread (coroutine job), so put_nowait is safe.
        queue.put_nowait(event.scheduled_run_time)

    scheduler.add_listener(on_executed, EVENT_JOB_EXECUTED)
    scheduler.add_listener(runs.submitted, EVENT_JOB_SUBMITTED)
    scheduler.add_listener(runs.finished, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)
    scheduler.start()
    scheduler.add_job(
        _fired,
        trigger,
        id="tick",
        misfire_grace_time=misfire_grace_s,
        coalesce=coalesce,
        max_instances=1,
    )
    if armed is not None:
        armed.set()
    try:
        while True:
            yield await queue.get()
    finally:
        await _stop(scheduler, runs)


class _Runs:
    """Job runs submitted and not yet finished, counted from the scheduler's public events.

    Each run time of a submission ends in exactly one executed, error or missed event."""

    def __init__(self) -> None:
        self.open = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def submitted(self, event: JobSubmissionEvent) -> None:
        self.open += len(event.scheduled_run_times)
        if self.open:
            self.idle.clear()

    def finished(self, event: JobExecutionEvent) -> None:
        self.open = max(0, self.open - 1)
        if not self.open:
            self.idle.set()


async def _stop(scheduler: AsyncIOScheduler, runs: _Runs) -> None:
    """Pause, let running jobs finish (bounded), then shut down without waiting on the loop."""
    if not scheduler.running:
        return
    scheduler.pause()
    try:
        await asyncio.wait_for(runs.idle.wait(), STOP_WAIT_S)
    except TimeoutError:
        log.warning("cron.stop_timeout", runs_left=runs.open, waited_s=STOP_WAIT_S)
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
        self.armed = asyncio.Event()  # set once the job is scheduled

    async def events(self) -> AsyncIterator[Event]:
        cfg = self.cfg
        trigger = self._trigger or CronTrigger.from_crontab(cfg.schedule, timezone=cfg.timezone)
        ticks = trigger_ticks(
            trigger,
            timezone=cfg.timezone,
            misfire_grace_s=cfg.misfire_grace_s,
            coalesce=cfg.coalesce,
            armed=self.armed,
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
