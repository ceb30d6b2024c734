"""The dispatch loop: lease events from the queue, gate them, run one cycle per enabled mode that takes them.

The supervisor owns the task this runs in; what it needs from the daemon (queue, state, modes, the
gate, the cycle's dependencies, flags) is the small `Host` protocol below, read live on every turn so a
config reload takes effect at the next event.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

import structlog

from autod import heap
from autod.config import Settings
from autod.cycle import Cycle, CycleDeps
from autod.events import Event
from autod.limits import Gate
from autod.modes import Mode
from autod.notify import Notifier
from autod.queue import EventQueue
from autod.state import State

log = structlog.get_logger("autod.dispatch")

IDLE_WAIT_S = 30.0  # a safety net only: events wake the dispatcher at once
TRIM_MIN_INTERVAL_S = 5.0  # heap trims when the queue runs dry, at most this often (each costs ms)
ONCE_MAX_WAIT_S = 300.0  # --once exits 2 rather than wait longer than this, in total, on limits


class Host(Protocol):
    """What the dispatcher reads from the daemon that runs it."""

    settings: Settings
    queue: EventQueue
    state: State
    modes: list[Mode]
    gate: Gate
    deps: CycleDeps
    planner_name: str
    paused: bool
    once: bool
    notifier: Notifier
    workspace_lock: asyncio.Lock
    wakeup: asyncio.Event
    stopping: asyncio.Event

    async def start_up_checks_done(self) -> bool: ...


class Dispatcher:
    """Runs cycles one at a time; `current`, `waiting_reason` and `error` are what status reports."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.current: Cycle | None = None
        self.waiting_reason = ""
        self.error: str | None = None  # --once: why it must exit 2
        self.cycles_run = 0
        self.cycles_since_trim = 0  # cycles run since the heap was last trimmed (autod.heap)
        self.last_trim = 0.0
        self.once_waited_s = 0.0

    async def run(self) -> None:
        """Lease events one at a time and run one cycle per enabled mode that takes it, in order."""
        h = self.host
        while not h.stopping.is_set():
            if h.paused:
                if h.once:  # a paused autod must not edit, and --once must not wait forever
                    self.error = "autod is paused (run `autod resume` first)"
                    return
                self.waiting_reason = "paused"
                await self.sleep(IDLE_WAIT_S)  # resume sets wakeup
                continue
            leased = await h.queue.alease()
            if leased is None:
                self.waiting_reason = ""
                if h.once and await self._drained():
                    return
                await self._trim_heap()
                # Idle: accept(), resume and stop set wakeup, so an idle daemon costs no polling.
                await self.sleep(1.0 if h.once else IDLE_WAIT_S)
                continue
            event = leased.event
            done = set(leased.done_modes) | await h.state.call(h.state.modes_done, event.id)
            finished = True
            for mode in h.modes:
                if mode.name in done or not mode.handles(event):
                    continue
                verdict = await h.state.call(h.gate.admit, event, uses_llm=h.planner_name == "llm")
                if verdict.drop:
                    log.warning("event dropped", reason=verdict.reason, summary=event.summary[:200])
                    break
                if not verdict.ok:
                    self.waiting_reason = verdict.reason
                    log.info("cycle waits", reason=verdict.reason, wait_s=round(verdict.wait_s, 1))
                    await h.queue.arelease(event.id)
                    finished = False
                    if h.once and self.once_waited_s + verdict.wait_s > ONCE_MAX_WAIT_S:
                        # e.g. a spent token budget or the hourly cap: an error, not a green or red verdict
                        self.error = f"--once would wait over {ONCE_MAX_WAIT_S:.0f}s: {verdict.reason}"
                        return
                    slept = time.monotonic()
                    await self.sleep(min(verdict.wait_s, 60.0))
                    self.once_waited_s += time.monotonic() - slept
                    break
                self.waiting_reason = ""
                await self.run_cycle(mode, event)
                self.cycles_since_trim += 1
                await h.queue.amark_done(event.id, mode.name)
                if h.stopping.is_set():
                    finished = False
                    break
            if finished:
                await h.queue.aack(event.id)

    async def run_cycle(self, mode: Mode, event: Event) -> None:
        h = self.host
        cycle = Cycle(h.deps, mode, event)
        self.current = cycle
        h.notifier.status(f"cycle {cycle.r.cycle_id}: {mode.name} on {event.kind}")
        try:
            async with h.workspace_lock:
                # a stop cancels this: the cycle rolls back its edits and records itself as stopped
                await cycle.run()
        finally:
            self.current = None
            self.cycles_run += 1
        h.notifier.status(f"idle; last cycle {cycle.r.status}; queue {await h.queue.adepth()}")

    async def sleep(self, seconds: float) -> None:
        """Wait up to `seconds`, or until something sets the host's wakeup event."""
        wakeup = self.host.wakeup
        wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), timeout=max(0.05, seconds))

    async def _drained(self) -> bool:
        return await self.host.start_up_checks_done() and self.host.queue.depth() == 0

    async def _trim_heap(self) -> None:
        """The queue ran dry after cycles: hand the heap they freed back to the OS (autod.heap)."""
        now = time.monotonic()
        if self.cycles_since_trim and now - self.last_trim >= TRIM_MIN_INTERVAL_S:
            self.cycles_since_trim, self.last_trim = 0, now
            await asyncio.to_thread(heap.trim)
