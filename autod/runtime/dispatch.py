"""The dispatch loop: lease events from the queue, check them against the present, gate them, run one
cycle per enabled mode that takes them, and decide what happens to them after (done, or tried again).

The supervisor owns the task this runs in; what it needs from the daemon (queue, state, the wiring,
flags) is the small `Host` protocol below. Each event is handled on the wiring in force when it was
leased (its modes, gate, cycles and retry decision), held to its end, so a config reload takes effect at
the next event and never halfway through one (autod.runtime.wiring). Every step runs under a deadline
kept in `progress`, which the watchdog reads (autod.runtime.progress).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

import structlog

from autod import heap
from autod.cycle.phases import Cycle
from autod.events import Event, EventKind
from autod.modes import Mode
from autod.plan import Plan
from autod.runtime.freshness import CheckLedger, Judgement, Run, judge
from autod.runtime.notify import Notifier
from autod.runtime.progress import STEP_S, Progress, cycle_budget
from autod.runtime.waiting import Hold
from autod.runtime.wiring import InUse, Wiring
from autod.stores.queue import EventQueue, Leased
from autod.stores.state import State

log = structlog.get_logger("autod.runtime.dispatch")

IDLE_WAIT_S = 30.0  # a safety net only: events wake the dispatcher at once
GATE_WAIT_MAX_S = 60.0  # a held event is looked at again at least this often (limits may change on reload)
TRIM_MIN_INTERVAL_S = 5.0  # heap trims when the queue runs dry, at most this often (each costs ms)
ONCE_MAX_WAIT_S = 300.0  # --once exits 2 rather than wait longer than this, in total, on limits
KEPT = frozenset({"fixed", "improved", "no_change"})  # a cycle that ends so keeps its edits
SLOT = "dispatch"


class Host(Protocol):
    """What the dispatcher reads from the daemon that runs it."""

    @property
    def wiring(self) -> Wiring:
        """The wiring in force (a reload replaces it whole)."""
        ...

    queue: EventQueue
    state: State
    paused: bool
    once: bool
    notifier: Notifier
    workspace_lock: asyncio.Lock
    wakeup: asyncio.Event
    stopping: asyncio.Event
    ledger: CheckLedger

    async def start_up_checks_done(self) -> bool: ...

    async def probe_check(self, name: str) -> None:
        """Run a check now (under the workspace lock) and record it; queue its failure if it fails."""
        ...

    async def runs_counted(self, runs: list[Run], event: Event | None) -> None:
        """Verification runs of a kept cycle now describe the workspace (autod.runtime.checkbook)."""
        ...


class CycleObserver(Protocol):
    """Told of every finished cycle (metrics, webhooks): quick, and never on the cycle's own path."""

    async def cycle_finished(self, cycle: Cycle) -> None: ...


class Dispatcher:
    """Runs cycles one at a time; `current`, `waiting_reason` and `error` are what status reports."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.current: Cycle | None = None
        self.waiting_reason = ""
        self.hold: Hold | None = None  # a limit holding every cycle until a time (status shows it per event)
        self.error: str | None = None  # --once: why it must exit 2
        self.cycles_run = 0
        self.cycles_since_trim = 0  # cycles run since the heap was last trimmed (autod.heap)
        self.last_trim = 0.0
        self.once_waited_s = 0.0
        self.progress = Progress()
        self.observers: list[CycleObserver] = []  # set by the daemon (autod.metrics, autod.webhooks)
        self.in_use = InUse()  # the wirings events and approvals still run on (a reload retires the old)

    def holding(self) -> contextlib.AbstractContextManager[Wiring]:
        """The wiring in force, held (kept open) until the block ends."""
        return self.in_use.hold(self.host.wiring)

    # -- the loop ---------------------------------------------------------------------
    async def run(self) -> None:
        """Lease events one at a time and run one cycle per enabled mode that takes it, in order."""
        h = self.host
        await self._wait_for_start_up()
        while not h.stopping.is_set():
            self.progress.step(SLOT, "dispatch", STEP_S)
            if h.paused:
                if h.once:  # a paused autod must not edit, and --once must not wait forever
                    self.error = "autod is paused (run `autod resume` first)"
                    return
                self.waiting_reason = "paused"
                await self.sleep(IDLE_WAIT_S)  # resume sets wakeup
                continue
            leased = await h.queue.alease()
            if leased is None:
                if not await self._idle():
                    return
                continue
            if not await self.handle(leased):
                return

    async def _wait_for_start_up(self) -> None:
        """After a (re)start, the start-up checks decide what is still news: nothing is planned before."""
        h = self.host
        s = h.wiring.settings
        start = [c for c in s.checks.values() if ("start" in c.when or h.once) and not c.fixer]
        budget = sum(c.timeout_s for c in start) + s.limits.cycle_grace_s + STEP_S
        self.progress.step(SLOT, "waiting for the start-up checks", budget)
        while not h.stopping.is_set() and not await h.start_up_checks_done():
            self.waiting_reason = "start-up checks"
            await self.sleep(0.5)
        self.waiting_reason = ""

    async def _idle(self) -> bool:
        """Nothing is due: wait for an event or the next retry. False: --once is finished."""
        h = self.host
        due = await h.queue.anext_due()
        # no time here: `status` shows each waiting event's own due time, once
        self.waiting_reason = "retries not yet due" if due else ""
        self.hold = None
        if h.once:
            if due is None:
                return False  # drained: the start-up checks ran and every event is done
            if self.once_waited_s + due > ONCE_MAX_WAIT_S:
                self.error = f"--once would wait over {ONCE_MAX_WAIT_S:.0f}s for a retry (in {due:.0f}s)"
                return False
        await self._trim_heap()
        # Idle: accept(), resume and stop set wakeup, so an idle daemon costs no polling.
        slept = time.monotonic()
        await self.sleep(min(IDLE_WAIT_S, due) if due is not None else IDLE_WAIT_S)
        self.once_waited_s += time.monotonic() - slept if h.once else 0.0
        return True

    async def handle(self, leased: Leased) -> bool:
        """One leased event: resolved, held back, or worked on by each mode that takes it, all on the
        wiring in force now. False: the loop must end (--once cannot wait that long)."""
        with self.holding() as wiring:
            return await self._handle(leased, wiring)

    async def _handle(self, leased: Leased, w: Wiring) -> bool:
        h = self.host
        event = leased.event
        verdict = await self.present(event, w)
        if verdict is None:  # a stop came while a check ran
            await h.queue.arelease(event.id)
            return True
        if not verdict.plan:
            await self.resolve(event, verdict.reason)
            return True
        done = set(leased.done_modes) | await h.state.call(h.state.modes_done, event.id, leased.deferred_at)
        for mode in w.modes:
            if mode.name in done or not mode.handles(event):
                continue
            admitted = await h.state.call(w.gate.admit, event, uses_llm=w.planner_name == "llm")
            if admitted.drop:
                log.warning("dispatch.event_dropped", reason=admitted.reason, summary=event.summary[:200])
                break
            if not admitted.ok:
                await h.queue.arelease(event.id)
                return await self._hold(admitted.reason, admitted.wait_s)
            self.waiting_reason, self.hold = "", None
            cycle = await self.run_cycle(w, mode, event)
            self.cycles_since_trim += 1
            decision = w.retry.decide(event, cycle.r, cycle.error, leased.retries)
            if decision.retry:
                retries = await h.queue.adefer(
                    event.id, decision.delay_s, decision.reason, kind=decision.kind
                )
                log.info("dispatch.retry_scheduled", event_id=event.id, retries=retries,
                         in_s=round(decision.delay_s, 1), reason=decision.reason[:300],
                         waits_for=decision.kind)
                return True
            if decision.action == "give_up":
                log.error("dispatch.gave_up", event_id=event.id, reason=decision.reason[:300],
                          summary=event.summary[:200])
            await h.queue.amark_done(event.id, mode.name)
            if h.stopping.is_set():
                return True
        await h.queue.aack(event.id)
        return True

    async def present(self, event: Event, w: Wiring) -> Judgement | None:
        """Check the event against the latest run of its check, running the check first if none exists."""
        h, s = self.host, w.settings
        verdict = judge(event, h.ledger, s.checks)
        if verdict.probe is not None:
            check = s.checks[verdict.probe]
            # it waits for the workspace lock first, which an approval's cycle may hold
            held = max((cycle_budget(s, m.name) for m in w.modes), default=0.0)
            budget = held + check.timeout_s + STEP_S
            self.progress.step(SLOT, f"running check {verdict.probe} to see the present", budget)
            await h.probe_check(verdict.probe)
            verdict = judge(event, h.ledger, s.checks)
            if verdict.probe is not None:
                return None
        return verdict

    async def resolve(self, event: Event, reason: str, *, acked: bool = False) -> None:
        """The event is old news: recorded (history shows it), its proposals withdrawn, no cycle.
        `acked`: it is already out of the queue."""
        h = self.host
        await h.state.call(h.state.event_resolved, event.id, event.fingerprint, str(event.kind),
                           event.summary, reason)
        withdrawn = await h.state.call(
            h.state.withdraw_proposals, f"its failure was resolved ({reason})"[:300],
            fingerprint=event.fingerprint,
        )
        log.info("dispatch.resolved", event_id=event.id, fingerprint=event.fingerprint, reason=reason,
                 summary=event.summary[:200], proposals_withdrawn=withdrawn)
        if not acked:
            await h.queue.aack(event.id)

    async def resolve_stale(self, check: str) -> None:
        """`check` passed: events still queued for its failures are old news (a failure fixed by hand),
        resolved now rather than when leased, so `status` stops listing them. One in flight is left to
        its cycle."""
        h = self.host
        for event in await h.queue.apending():
            if event.kind != EventKind.CHECK_FAILED or event.payload.get("check") != check:
                continue
            verdict = judge(event, h.ledger, h.wiring.settings.checks)
            if not verdict.plan and verdict.probe is None and await h.queue.adrop_pending(event.id):
                await self.resolve(event, verdict.reason, acked=True)

    async def _hold(self, reason: str, wait_s: float) -> bool:
        """A limit holds the event: say why and wait (bounded). False: --once cannot wait that long."""
        h = self.host
        self.waiting_reason, self.hold = reason, Hold(reason, time.time() + wait_s)
        log.info("dispatch.waiting", reason=reason, wait_s=round(wait_s, 1))
        if h.once and self.once_waited_s + wait_s > ONCE_MAX_WAIT_S:
            # known at once (the hourly cap's slot, a spent token budget): an error, not a green/red verdict
            self.error = f"--once would wait over {ONCE_MAX_WAIT_S:.0f}s: {reason} (another {wait_s:.0f}s)"
            return False
        slept = time.monotonic()
        await self.sleep(min(wait_s, GATE_WAIT_MAX_S))
        self.once_waited_s += time.monotonic() - slept
        return True

    # -- one cycle ----------------------------------------------------------------------
    async def run_cycle(
        self, w: Wiring, mode: Mode, event: Event, *, approved: Plan | None = None, slot: str = SLOT
    ) -> Cycle:
        """One cycle of `mode` (one of `w`'s, and the caller holds `w`) under the workspace lock and its
        deadline; its check runs count if it keeps its edits."""
        h = self.host
        cycle = Cycle(w.deps, mode, event, approved=approved)
        budget = cycle_budget(w.settings, mode.name)
        # the lock may be held by a check, or by another cycle (an approval) with the same budget
        longest_check = max((c.timeout_s for c in w.settings.checks.values()), default=0.0)
        self.progress.step(slot, "waiting for the workspace lock", budget + longest_check + STEP_S)
        runs: list[Run] = []
        async with h.workspace_lock:
            self.current = cycle
            h.notifier.status(f"cycle {cycle.r.cycle_id}: {mode.name} on {event.kind}")
            self.progress.step(slot, f"cycle {cycle.r.cycle_id}", budget, cycle)
            h.ledger.hold()
            kept = False
            try:
                # a stop cancels this: the cycle rolls back its edits and records itself as stopped
                await cycle.run()
                kept = cycle.r.status in KEPT
            finally:
                runs = h.ledger.release(keep=kept, since=w.deps.own_writes.last_at)
                self.current = None
                self.cycles_run += 1
                if slot == SLOT:
                    self.progress.step(slot, "dispatch", STEP_S)
                else:
                    self.progress.done(slot)
        if runs:
            await h.runs_counted(runs, event)
        h.notifier.status(f"idle; last cycle {cycle.r.status}; queue {await h.queue.adepth()}")
        for observer in self.observers:
            try:
                await observer.cycle_finished(cycle)
            except Exception:  # an observer's trouble is its own, never the dispatcher's
                log.exception("dispatch.observer_failed", observer=type(observer).__name__)
        return cycle

    # -- helpers -------------------------------------------------------------------------
    async def sleep(self, seconds: float) -> None:
        """Wait up to `seconds` (under STEP_S), or until something sets the host's wakeup event."""
        wakeup = self.host.wakeup
        wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), timeout=max(0.05, seconds))

    async def _trim_heap(self) -> None:
        """The queue ran dry after cycles: hand the heap they freed back to the OS (autod.heap)."""
        now = time.monotonic()
        if self.cycles_since_trim and now - self.last_trim >= TRIM_MIN_INTERVAL_S:
            self.cycles_since_trim, self.last_trim = 0, now
            await asyncio.to_thread(heap.trim)
