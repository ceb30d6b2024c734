"""What the config decides, as one frozen value: the planner, the gate, the retry policy, the modes and
the cycle's dependencies, built from the settings (autod.daemon.wiring) and swapped whole on reload.

Whatever starts on a wiring keeps it to its end (an event's cycles and what is decided after them, an
approval, a status read), so nothing sees half the old config and half the new. A wiring a reload
replaced is closed (its LLM planner's connections) once the last of them is done (`InUse`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from autod import logs
from autod.config.settings import Settings
from autod.cycle.deps import CycleDeps
from autod.cycle.limits import CircuitBreaker, Gate
from autod.delivery.deliver import Delivery
from autod.modes import Mode
from autod.planner import Planner, ServerPlanner
from autod.runtime.retry import RetryPolicy


@dataclass(frozen=True, eq=False)  # one wiring is one build: told apart by identity
class Wiring:
    """The daemon's parts that depend on its config, all built from `settings`."""

    settings: Settings
    modes: tuple[Mode, ...]  # the enabled modes, in the order their cycles run for one event
    deps: CycleDeps  # what each cycle is given: its env, gate, (metered) planner, breaker, hooks, mirror
    planner: Planner  # the planner itself: status shows its endpoint, a ServerPlanner is closed with it
    delivery: Delivery  # where fixes go (also in `deps`): status lists it, undo takes a delivery back
    retry: RetryPolicy  # what happens to an event after its cycle
    config_problems: tuple[str, ...] = ()  # checks that cannot start, found before they ran

    @property
    def gate(self) -> Gate:
        """Whether a cycle may start, and what it may spend (the cycle's own gate)."""
        return self.deps.gate

    @property
    def breaker(self) -> CircuitBreaker | None:
        """The LLM's circuit breaker; None offline."""
        return self.deps.breaker

    @property
    def planner_name(self) -> str:
        return self.deps.planner_name

    def mode(self, name: str) -> Mode | None:
        """The enabled mode called `name`, if it is enabled."""
        return next((m for m in self.modes if m.name == name), None)

    async def close(self) -> None:
        """Close what this wiring opened: the LLM planner's connections (the offline one has none)."""
        if isinstance(self.planner, ServerPlanner):
            with logs.survive("llm.close_failed"):
                await self.planner.aclose()


class InUse:
    """The wirings that something still runs on. A wiring a reload retired is closed once nothing holds
    it any more, never under a cycle that still uses its planner."""

    def __init__(self) -> None:
        self._holds: dict[Wiring, int] = {}
        self._retired: list[Wiring] = []
        self._closing: set[asyncio.Task[None]] = set()  # held until done (the loop keeps weak refs)

    @contextlib.contextmanager
    def hold(self, wiring: Wiring) -> Iterator[Wiring]:
        """`wiring` stays open for as long as this is held."""
        self._holds[wiring] = self._holds.get(wiring, 0) + 1
        try:
            yield wiring
        finally:
            self._holds[wiring] -= 1
            if not self._holds[wiring]:
                del self._holds[wiring]
            self._close_unheld()

    def held(self, wiring: Wiring) -> bool:
        return wiring in self._holds

    def retire(self, wiring: Wiring) -> None:
        """A reload replaced `wiring`: close it now if nothing holds it, else when the last hold ends."""
        self._retired.append(wiring)
        self._close_unheld()

    def _close_unheld(self) -> None:
        for wiring in [w for w in self._retired if w not in self._holds]:
            self._retired.remove(wiring)
            task = asyncio.create_task(wiring.close(), name="wiring-close")
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """At stop, when nothing runs any more: every retired wiring closed, held or not."""
        retired, self._retired = self._retired, []
        for wiring in retired:
            await wiring.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
