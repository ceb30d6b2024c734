"""The check source: runs configured checks at start-up, after watched files settle, and on cron.

A failing check becomes a `check_failed` event carrying its output, the file:line locations it names,
when the run finished (`checked_at`, so the dispatcher can tell stale news from fresh) and a fingerprint
that survives line-number churn but keeps the identity of each failure. A check that cannot start at
all is a configuration error: logged, shown by `autod status`, never an event for a cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import structlog

from autod import logs
from autod.checks.digest import digest
from autod.checks.outcome import count_failures, failing_tests
from autod.checks.run import CheckResult, run_check
from autod.config.settings import Settings
from autod.events import Event, EventKind, fingerprint
from autod.linebreaks import lines_of
from autod.logs import redact_text
from autod.sources.parsers import parse_failures, parse_locations

log = structlog.get_logger("autod.checks.source")

EXCERPT_CHARS = 12000


def _identify(result: CheckResult, output: str) -> tuple[str, str]:
    """(fingerprint, first failure's summary) of a failed run, from its (redacted) output."""
    failures = parse_failures(output)
    if failures:
        # The single failures' fingerprints are identities (16 hex digits): hashed as they are, never
        # normalised, or every one-failure run of a check would share one fingerprint.
        fp = fingerprint("check", result.name, exact=sorted({f.fingerprint for f in failures}))
        return fp, failures[0].summary
    tail = "\n".join(lines_of(output.strip())[-20:])
    fp = fingerprint("check", result.name, str(result.exit_code), tail)
    return fp, (lines_of(output.strip()) or ["no output"])[-1][:200]


def result_fingerprint(result: CheckResult) -> str:
    """The fingerprint the event of this failed run carries."""
    return _identify(result, redact_text(result.output))[0]


def failure_event(result: CheckResult, *, checked_at: float | None = None) -> Event:
    """Turn a failed check run into a check_failed Event (known secrets redacted from its output;
    `checked_at`: when the run finished)."""
    output = redact_text(result.output)
    fp, first = _identify(result, output)
    return Event(
        source=f"check:{result.name}",
        kind=EventKind.CHECK_FAILED,
        summary=f"check {result.name} failed (exit {result.exit_code}): {first}"[:500],
        payload={
            "check": result.name,
            "exit_code": result.exit_code,
            "excerpt": output[-EXCERPT_CHARS:],  # the tail: localization, memory and replays read it
            "digest": digest(output, EXCERPT_CHARS),  # what a prompt shows: each failure's essentials
            "locations": parse_locations(output)[:50],
            "failures": count_failures(result),
            "failing_tests": sorted(failing_tests(output) or ()),  # pytest node ids, for `improved`
            "timed_out": result.timed_out,
            "duration_ms": result.duration_ms,  # how long the failing run took (candidates' deadline)
            "checked_at": time.time() if checked_at is None else checked_at,
        },
        fingerprint=fp,
    )


class CheckSource:
    """Runs checks on their `when:` triggers and yields an Event for each failure."""

    name = "check"

    def __init__(
        self,
        settings: Settings,
        *,
        lock: asyncio.Lock | None = None,
        on_result: Callable[[CheckResult, float], Awaitable[object]] | None = None,
        run_start: bool = True,
        start_all: bool = False,
    ) -> None:
        self.settings = settings
        self.lock = lock or asyncio.Lock()
        self.on_result = on_result
        self.run_start = run_start
        # `run --once`: every check (fixers aside) runs at start-up (autod.runtime.once)
        self.start_all = start_all
        self._triggers: asyncio.Queue[tuple[str, list[str]]] = asyncio.Queue()
        self.started = asyncio.Event()  # set once the start-up checks have run (or they were stopped)
        self.armed = asyncio.Event()  # set once the start-up checks have run and triggers are taken

    def notify_change(self, paths: list[str]) -> None:
        """Files settled: queue the `change` checks (coalesced: one run per burst)."""
        names = [n for n, c in self.settings.checks.items() if "change" in c.when and not c.fixer]
        if names and self._triggers.empty():
            self._triggers.put_nowait(("change", names))

    def trigger(self, names: list[str], why: str = "manual") -> None:
        self._triggers.put_nowait((why, [n for n in names if n in self.settings.checks]))

    async def run(self, name: str) -> tuple[CheckResult, float]:
        """Run one check under the workspace lock; returns its result and when it finished."""
        async with self.lock:
            result = await run_check(
                name, self.settings.checks[name], self.settings.workspace, settings=self.settings
            )
            at = time.time()
            if result.error:
                # exit 126/127, program not found: nothing a cycle could fix, so never an event
                log.error("check.cannot_start", check=name, error=result.error)
            else:
                log.info("check.ran", check=name, exit_code=result.exit_code, duration_ms=result.duration_ms)
            if self.on_result is not None:  # recorded before a cycle can take the lock and read results
                await self.on_result(result, at)
        return result, at

    async def event_for(self, result: CheckResult, at: float) -> Event | None:
        """The event a run gives: a failure that is not a configuration error (its output parsed in a
        worker thread: a check's output is untrusted and can be long)."""
        if result.ok or result.error:
            return None
        return await asyncio.to_thread(failure_event, result, checked_at=at)

    async def _cron(self, name: str, expr: str) -> None:
        from autod.sources.cron import cron_ticks

        async for _ in cron_ticks(expr):
            await self._triggers.put((f"cron {expr}", [name]))

    async def events(self) -> AsyncIterator[Event]:
        crons = [
            asyncio.create_task(self._cron(n, expr), name=f"check-cron:{n}")
            for n, c in self.settings.checks.items()
            for expr in c.cron
        ]
        try:
            if self.run_start:
                start = [
                    n for n, c in self.settings.checks.items()
                    if ("start" in c.when or self.start_all) and not c.fixer
                ]
                for name in start:
                    event = await self.event_for(*await self.run(name))
                    if event is not None:
                        yield event
            self.started.set()
            self.armed.set()
            while True:
                why, names = await self._triggers.get()
                for name in names:
                    event = await self.event_for(*await self.run(name))
                    if event is not None:
                        log.info("check.failed", check=name, trigger=why)
                        yield event
        finally:
            self.started.set()
            for t in crons:
                t.cancel()
            for t in crons:
                with contextlib.suppress(asyncio.CancelledError), logs.survive("check.cron_stop_failed"):
                    await t
