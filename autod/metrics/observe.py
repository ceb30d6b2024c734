"""Feeding the metrics from outside the cycle, at the seams autod already has: the dispatcher's finished
cycles, the Planner protocol (LLM requests), the Mode protocol (localization), and check results."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from autod.errors import ContextTooLong, CycleError, LLMUnavailable, PlanInvalid
from autod.metrics.registry import Metrics
from autod.modes import Mode, ReportWriter

if TYPE_CHECKING:
    from autod.act.edits import ScopeCheck
    from autod.checks.run import CheckResult
    from autod.cycle.phases import Cycle
    from autod.events import Event, EventKind
    from autod.memory import Recalled
    from autod.modes import Attempt, ModeEnv, Sections, Verification
    from autod.ownwrites import OwnWrites
    from autod.plan import Plan
    from autod.planner import PlanRequest, PlanResult, ServerPlanner


def outcome_of(exc: BaseException | None) -> str:
    """The label of a plan request's outcome."""
    if exc is None:
        return "ok"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, ContextTooLong):
        return "context_too_long"
    if isinstance(exc, LLMUnavailable):
        return "unavailable"
    if isinstance(exc, PlanInvalid):
        return "invalid"
    if isinstance(exc, CycleError):
        return "refused"
    return "error"


class MeteredPlanner:
    """A ServerPlanner that counts and times each plan request of the planner it wraps (the LLM's); the
    rest of the ServerPlanner protocol is the wrapped planner's."""

    def __init__(self, inner: ServerPlanner, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def plan(self, request: PlanRequest) -> PlanResult:
        start = time.monotonic()
        error: BaseException | None = None
        try:
            return await self.inner.plan(request)
        except BaseException as exc:
            error = exc
            raise
        finally:
            self.metrics.llm_requests.labels(outcome_of(error)).inc()
            self.metrics.llm_seconds.observe(time.monotonic() - start)

    @property
    def endpoint(self) -> str:
        return self.inner.endpoint

    @property
    def chars_per_token(self) -> float | None:
        return self.inner.chars_per_token

    @property
    def read_per_generated(self) -> float | None:
        return self.inner.read_per_generated

    @property
    def write_seconds(self) -> float | None:
        return self.inner.write_seconds

    @property
    def holds_lines(self) -> bool:
        return self.inner.holds_lines

    async def context_window(self) -> int | None:
        return await self.inner.context_window()

    def reply_tokens(self, mode: str) -> int:
        return self.inner.reply_tokens(mode)

    async def ping(self) -> bool:
        return await self.inner.ping()

    async def aclose(self) -> None:
        await self.inner.aclose()


class TimedMode:
    """A Mode whose `context()` (localization, for auto-debug) is timed; the rest of the Mode protocol is
    the wrapped mode's."""

    def __init__(self, inner: Mode, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def context(self, event: Event, env: ModeEnv, recalled: list[Recalled]) -> Sections:
        start = time.monotonic()
        try:
            return await self.inner.context(event, env, recalled)
        finally:
            self.metrics.localize_seconds.labels(self.inner.name).observe(time.monotonic() - start)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def kinds(self) -> frozenset[EventKind]:
        return self.inner.kinds

    @property
    def writes_code(self) -> bool:
        return self.inner.writes_code

    @property
    def reply_form(self) -> str:
        return self.inner.reply_form

    @property
    def stop(self) -> tuple[str, ...]:
        return self.inner.stop

    def handles(self, event: Event) -> bool:
        return self.inner.handles(event)

    def messages(
        self, event: Event, context: dict[str, str], attempts: list[Attempt]
    ) -> list[dict[str, str]]:
        return self.inner.messages(event, context, attempts)

    def scope(self, env: ModeEnv) -> ScopeCheck | None:
        return self.inner.scope(env)

    async def verify(self, event: Event, plan: Plan, env: ModeEnv) -> Verification:
        return await self.inner.verify(event, plan, env)


class ReportMode(Mode, ReportWriter, Protocol):
    """A mode that writes a report (auto-plan, auto-doc)."""


class TimedReportMode(TimedMode):
    """A timed mode that writes a report: a ReportWriter, as the mode it wraps is."""

    def __init__(self, inner: ReportMode, metrics: Metrics) -> None:
        super().__init__(inner, metrics)
        self.writer = inner

    async def write_report(self, event: Event, plan: Plan, env: ModeEnv, own: OwnWrites) -> Path:
        return await self.writer.write_report(event, plan, env, own)


def timed(mode: Mode, metrics: Metrics) -> TimedMode:
    """`mode` with its context() timed, a ReportWriter still when it is one."""
    return TimedReportMode(mode, metrics) if isinstance(mode, ReportWriter) else TimedMode(mode, metrics)


class CycleMetrics:
    """The dispatcher's observer: every finished cycle counted and timed."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    async def cycle_finished(self, cycle: Cycle) -> None:
        self.metrics.cycle_finished(cycle.r.record())


def check_ran(metrics: Metrics, result: CheckResult) -> None:
    """One check run (by a source, a probe or verification)."""
    metrics.check_ran(
        result.name,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        sandbox=result.sandbox,
        timed_out=result.timed_out,
        error=result.error,
    )


def describe(metrics: Metrics, settings: Any, planner: str) -> None:
    """The `autod_info` labels: what this daemon is."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("autod")
    except PackageNotFoundError:
        v = "unknown"
    metrics.info.info({"version": v, "planner": planner, "workspace": str(settings.workspace)})
