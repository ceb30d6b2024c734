"""Feeding the metrics from outside the cycle, at the seams autod already has: the dispatcher's finished
cycles, the Planner protocol (LLM requests), the Mode protocol (localization), and check results."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from autod.errors import ContextTooLong, CycleError, LLMUnavailable, PlanInvalid
from autod.metrics.registry import Metrics

if TYPE_CHECKING:
    from autod.checks.run import CheckResult
    from autod.cycle.phases import Cycle
    from autod.planner import Planner, PlanRequest, PlanResult


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
    """A Planner that counts and times each plan request of the planner it wraps (the LLM's)."""

    def __init__(self, inner: Planner, metrics: Metrics) -> None:
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

    def __getattr__(self, name: str) -> Any:  # ping, endpoint, aclose: the wrapped planner's
        return getattr(self.inner, name)


class TimedMode:
    """A Mode whose `context()` (localization, for auto-debug) is timed; everything else is the mode's."""

    def __init__(self, inner: Any, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def context(self, *args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return await self.inner.context(*args, **kwargs)
        finally:
            self.metrics.localize_seconds.labels(self.inner.name).observe(time.monotonic() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


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
