"""The gauges: read from the daemon's stores every `metrics.sample_s`, on the event loop's own terms
(the stores' threads), so a scrape only reads numbers and never touches a database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from autod import logs
from autod.metrics.registry import Metrics

log = structlog.get_logger("autod.metrics")

MEMORY_TIMEOUT_S = 5.0


class Sampled(Protocol):
    """What the sampler reads from the running daemon."""

    queue: Any  # autod.stores.queue.EventQueue
    state: Any  # autod.stores.state.State
    memory: Any  # autod.memory.resilient.ResilientMemory | None
    paused: bool
    dispatcher: Any  # autod.runtime.dispatch.Dispatcher


async def sample_once(daemon: Sampled, metrics: Metrics, extra: list[Callable[[], Awaitable[None]]]) -> None:
    """Read every gauge once; a store that fails leaves its gauges as they were."""
    try:
        metrics.queue_depth.set(await daemon.queue.adepth())
        retries = await asyncio.to_thread(daemon.queue.retrying, 10_000)
        metrics.retries_waiting.set(sum(1 for r in retries if r.get("status") == "pending"))
        state = daemon.state
        metrics.quarantined.set(len(await state.call(state.quarantined)))
    except Exception as exc:  # a busy or closing db: the next sample tries again
        log.debug("metrics.sample_failed", part="queue", error=type(exc).__name__)
    metrics.paused.set(1 if daemon.paused else 0)
    metrics.wedged.set(1 if daemon.dispatcher.progress.wedged() else 0)
    memory = daemon.memory
    if memory is not None:
        try:
            stats = await asyncio.wait_for(memory.stats(), MEMORY_TIMEOUT_S)
            for tier, figures in (stats.get("tiers") or {}).items():
                count = figures.get("count")
                metrics.memory_items.labels(tier).set(count if count is not None else figures.get("own", 0))
            metrics.memory_spooled.set(
                int(stats.get("spooled") or 0)
                if not isinstance(stats.get("spooled"), dict)
                else sum(stats["spooled"].values())
            )
        except Exception as exc:  # memory trouble is the memory's to report (status says degraded)
            log.debug("metrics.sample_failed", part="memory", error=type(exc).__name__)
    for fn in extra:
        with logs.survive("metrics.sample_failed", part=getattr(fn, "__name__", "extra")):
            await fn()


async def sampler(
    daemon: Sampled,
    metrics: Metrics,
    every_s: Callable[[], float],
    extra: list[Callable[[], Awaitable[None]]] | None = None,
    enabled: Callable[[], bool] = lambda: True,
) -> None:
    """Runs until cancelled; `every_s` and `enabled` are read live (a reload may change them). While
    nothing is served it only sleeps (`autod metrics` samples on demand)."""
    while True:
        if enabled():
            await sample_once(daemon, metrics, extra or [])
        await asyncio.sleep(every_s())
