"""Is the dispatcher making progress? What the systemd watchdog asks before each ping.

Every step of the dispatch loop, and every cycle, runs under a deadline it cannot legitimately pass:
a cycle's is its plan timeout plus its check timeouts plus `limits.cycle_grace_s`, per attempt. A step
past its deadline is wedged: the watchdog stops pinging, so systemd restarts the daemon (the rollback
at start-up undoes the cycle's edits), and `daemon.wedged` says at error level which cycle, in which
phase. A live event loop is not enough: a cycle stuck on a call without a deadline leaves it running.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from autod.checks.process import KILL_GRACE_S
from autod.config.settings import Settings
from autod.localize.focus import MAX_VALUES

if TYPE_CHECKING:
    from autod.cycle.phases import Cycle

log = structlog.get_logger("autod.runtime.progress")

STEP_S = 120.0  # a dispatcher step outside a cycle (a queue or state call): sqlite waits 30 s at most
# An attempt may ask the planner twice, each under the plan timeout: again with less context after a
# context overflow, or once more with the definitions the plan asked for.
PLAN_CALLS_PER_ATTEMPT = 2


def cycle_budget(settings: Settings, mode: str) -> float:
    """The longest a healthy cycle of `mode` can take. With an LLM: the first attempt draws
    `candidates.focused` plans from each suspect's prompt and one from each value group's (whose
    reply is checked one change at a time, then whole); every attempt draws `candidates.n` from the
    wide prompt; sampled plans that proposed nothing new are redrawn, as many as the prompt's draws at
    most; an attempt's
    first request may ask twice (a context overflow, a request for more definitions). Offline: the
    fixers are the planner, one plan an attempt. Every check runs for each plan checked and once more
    for each attempt's winner in the tree, and once more for the coverage re-run; plus the grace."""
    def runs(fixers: bool) -> float:
        return sum(c.timeout_s + 2 * KILL_GRACE_S for c in settings.checks.values() if c.fixer == fixers)

    run_s = runs(False)
    attempts = settings.modes.get(mode).max_attempts_per_cycle
    # a recall may wait memory.timeout_s for the last cycle's writes, then as long for its query
    memory_s = 2 * settings.memory.timeout_s
    c = settings.candidates
    if settings.llm.base_url:
        plan_s = settings.llm.timeout_s
        focused = settings.localize.focus_definitions * c.focused
        values = settings.localize.focus_values if focused else 0
        wide = attempts * c.n
        drawn = 2 * (focused + wide) + values  # a prompt is redrawn as often as it is drawn, at most
        checked = focused + values * (MAX_VALUES + 1) + wide  # a redrawn plan is never checked
        asked = attempts * (PLAN_CALLS_PER_ATTEMPT - 1) + drawn
    else:
        plan_s = runs(True)
        asked = attempts * PLAN_CALLS_PER_ATTEMPT
        checked = attempts
    return (asked * plan_s + (checked + attempts) * run_s + attempts * memory_s + run_s
            + settings.limits.cycle_grace_s)


@dataclass
class Step:
    what: str
    started: float
    deadline: float
    cycle: Cycle | None = None  # when the step is a cycle (its id and phase go into the log)
    reported: bool = False


class Progress:
    """Named slots (the dispatch loop, an approval) each holding the step it is on and its deadline."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self.slots: dict[str, Step] = {}

    def step(self, slot: str, what: str, budget_s: float, cycle: Cycle | None = None) -> None:
        """The slot starts a new step that must end within `budget_s`."""
        now = self.clock()
        self.slots[slot] = Step(what, now, now + budget_s, cycle)

    def done(self, slot: str) -> None:
        self.slots.pop(slot, None)

    @contextmanager
    def running(self, slot: str, what: str, budget_s: float, cycle: Cycle | None = None) -> Iterator[None]:
        self.step(slot, what, budget_s, cycle)
        try:
            yield
        finally:
            self.done(slot)

    def wedged(self) -> dict[str, Any] | None:
        """The first step past its deadline, described for the log and `status`; None when all is well."""
        now = self.clock()
        for slot, st in list(self.slots.items()):
            if now > st.deadline:
                info: dict[str, Any] = {
                    "slot": slot,
                    "what": st.what,
                    "running_s": round(now - st.started, 1),
                    "deadline_s": round(st.deadline - st.started, 1),
                }
                if st.cycle is not None:
                    info["cycle_id"] = st.cycle.r.cycle_id
                    info["phase"] = st.cycle.phase_now
                if not st.reported:
                    st.reported = True
                    log.error("daemon.wedged", **info)
                return info
        return None

    def healthy(self) -> bool:
        """For the watchdog: ping only while no step is past its deadline."""
        return self.wedged() is None
