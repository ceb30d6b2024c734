"""Where a candidate is verified: on the workspace's mirror (never the operator's tree), or in place.

`Isolated` stages the candidate's files on the mirror (autod.isolation) and runs the mode's own
verification with the mirror's check runner: the same checks, focus commands and arithmetic as in
the tree, none of it visible there, and none of it counted as the tree's check results. `InPlace` is
the fallback where the mirror cannot be used (no bwrap, a check with `sandbox: off`, a workspace over
the mirror's limits): the cycle's own act step, journalled and rolled back when it fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import structlog

from autod.act.edits import FileChange
from autod.events import Event
from autod.isolation import Isolation, TooLarge
from autod.modes import Mode, ModeEnv, Verification
from autod.plan import Plan

log = structlog.get_logger("autod.candidates")

Act = Callable[[Plan], Awaitable[Verification | None]]


class InPlace:
    """Verify in the working tree through the cycle's act step (journal, keep or roll back)."""

    in_place = True

    def __init__(self, act: Act) -> None:
        self.act = act

    async def validate(self, plan: Plan, changes: list[FileChange]) -> Verification | None:
        return await self.act(plan)


class Isolated:
    """Verify on the mirror; falls back to `InPlace` for good when the workspace is too large for it."""

    def __init__(
        self, isolation: Isolation, mode: Mode, event: Event, env: ModeEnv, fallback: InPlace
    ) -> None:
        self.isolation = isolation
        self.mode = mode
        self.event = event
        self.env = dataclasses.replace(env, run_check=isolation.run_check)
        self.fallback = fallback
        self.in_place = False

    async def validate(self, plan: Plan, changes: list[FileChange]) -> Verification | None:
        if self.in_place:
            return await self.fallback.validate(plan, changes)
        files = {c.rel: c.new for c in changes}
        modes = {c.rel: c.mode for c in changes}
        try:
            await self.isolation.stage(files, modes)
        except TooLarge:
            log.warning("candidates.verified_in_place", reason="the workspace is too large to mirror")
            self.in_place = True
            return await self.fallback.validate(plan, changes)
        return await self.mode.verify(self.event, plan, self.env)


async def choose_validator(
    isolation: Isolation | None, mode: Mode, event: Event, env: ModeEnv, in_place: InPlace
) -> InPlace | Isolated:
    """`Isolated` when the workspace's mirror can be used here, else `in_place` (saying why)."""
    why = "no mirror configured" if isolation is None else await isolation.unavailable()
    if isolation is None or why is not None:
        log.info("candidates.verified_in_place", reason=why)
        return in_place
    return Isolated(isolation, mode, event, env, in_place)
