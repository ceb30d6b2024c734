"""Housekeeping the daemon runs beside its cycles: proposals past their TTL expire, memory is pruned."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from autod import logs
from autod.memory import Memory
from autod.stores.state import State

log = structlog.get_logger("autod.daemon.supervisor")

EXPIRE_EVERY_S = 60.0


async def housekeeping(
    state: State, memory: Callable[[], Memory | None], prune_schedule: Callable[[], str]
) -> None:
    """Runs until cancelled. `memory` and `prune_schedule` are read live (a reload may change them)."""
    from autod.sources.cron import cron_ticks

    async def prune() -> None:
        async for _ in cron_ticks(prune_schedule()):
            mem = memory()
            if mem is None or not hasattr(mem, "prune"):
                continue
            try:
                removed = await mem.prune(scheduled=True)  # each daemon at its own share of the hour
            except Exception as exc:  # a failed prune is retried at the next tick
                log.error("memory.prune_failed", error=f"{type(exc).__name__}: {str(exc)[:200]}")
                continue
            log.info("memory.pruned", removed=removed)

    prune_task = asyncio.create_task(prune(), name="memory-prune")
    try:
        while True:
            expired = await state.call(state.expire_proposals)
            if expired:
                log.info("proposal.expired", ids=expired)
            await asyncio.sleep(EXPIRE_EVERY_S)
    finally:
        prune_task.cancel()
        with contextlib.suppress(asyncio.CancelledError), logs.survive("memory.prune_stop_failed"):
            await prune_task
