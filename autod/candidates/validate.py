"""Where a candidate is verified: on the workspace's mirror (never the operator's tree), or in place.

`Isolated` stages the candidate's files on the mirror (autod.isolation) and runs the mode's own
verification with the mirror's check runner: the same checks, focus commands and arithmetic as in
the tree, none of it visible there, and none of it counted as the tree's check results. `InPlace` is
the fallback where the mirror cannot be used (no bwrap, a check with `sandbox: off`, a workspace over
the mirror's limits): the cycle's own act phase (`IntoTree`), journalled and rolled back when it fails.

A candidate's check on the mirror has a deadline of its own: `candidates.check_timeout_factor` times
the longest of the failing run and the check's last passing run, at least `check_timeout_min_s`, at
most the check's `timeout_s`. A candidate that makes the code loop forever (a small model drops a
loop's exit often enough) then costs minutes, not the check's whole timeout, and a fix that runs the
suite as long as a passing run did is never cut short.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import structlog

from autod.act.edits import FileChange
from autod.candidates.candidate import IntoTree
from autod.events import Event
from autod.isolation import Isolation, TooLarge
from autod.modes import Mode, ModeEnv, Verification
from autod.plan import Plan

log = structlog.get_logger("autod.candidates")

# + check name: how long its last passing run took (autod.runtime.checkbook writes it)
PASSING_MS_KEY = "check_passing_ms:"

class InPlace:
    """Verify in the working tree through the cycle's act phase (journal, keep or roll back)."""

    in_place = True

    def __init__(self, into_tree: IntoTree) -> None:
        self.into_tree = into_tree

    async def validate(self, plan: Plan, changes: list[FileChange]) -> Verification | None:
        written = await self.into_tree(plan)
        if written is None:  # held as a proposal
            return None
        v = written.verification
        if v.status == "rolled_back" and written.left:
            return Verification("partly_rolled_back", v.checks, v.reason)  # ends the search
        return v


class Isolated:
    """Verify on the mirror; falls back to `InPlace` for good when the workspace is too large for it."""

    def __init__(
        self, isolation: Isolation, mode: Mode, event: Event, env: ModeEnv, fallback: InPlace
    ) -> None:
        self.isolation = isolation
        self.mode = mode
        self.event = event
        self.env = dataclasses.replace(env, run_check=self._run_check)
        self.fallback = fallback
        self.in_place = False
        self._deadlines: dict[str, float | None] = {}

    async def _run_check(self, name: str, **extra: Any) -> Any:
        if name not in self._deadlines:
            self._deadlines[name] = await self.deadline(name)
            if self._deadlines[name] is not None:  # why a candidate's run may stop before timeout_s
                log.info("candidates.check_deadline", check=name, timeout_s=round(self._deadlines[name], 1),
                         check_timeout_s=self.env.settings.checks[name].timeout_s)
        if self._deadlines[name] is not None:
            extra.setdefault("timeout_s", self._deadlines[name])
        return await self.isolation.run_check(name, **extra)

    async def deadline(self, name: str) -> float | None:
        """Seconds a candidate's run of check `name` may take; None: the check's own timeout_s."""
        settings = self.env.settings
        cfg, check = settings.candidates, settings.checks.get(name)
        if check is None or cfg.check_timeout_factor <= 0:
            return None
        failing = self.event.payload.get("duration_ms") if self.event.payload.get("check") == name else None
        passing = await self.env.state.call(self.env.state.get_kv, f"{PASSING_MS_KEY}{name}")
        seen = [v / 1000 for v in (failing, passing) if type(v) in (int, float)]  # never a bool
        if not seen or max(seen) <= 0:
            return None  # nothing measured: the check's own timeout
        factor, floor = cfg.check_timeout_factor, cfg.check_timeout_min_s
        return candidate_deadline(check.timeout_s, max(seen), factor, floor)

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


def candidate_deadline(timeout_s: float, seen_s: float, factor: float, floor_s: float) -> float | None:
    """min(timeout_s, max(floor_s, factor * seen_s)); None when that is the check's own timeout."""
    deadline = max(floor_s, factor * seen_s)
    return deadline if deadline < timeout_s else None


async def choose_validator(
    isolation: Isolation | None, mode: Mode, event: Event, env: ModeEnv, in_place: InPlace
) -> InPlace | Isolated:
    """`Isolated` when the workspace's mirror can be used here, else `in_place` (saying why)."""
    why = "no mirror configured" if isolation is None else await isolation.unavailable()
    if isolation is None or why is not None:
        log.info("candidates.verified_in_place", reason=why)
        return in_place
    return Isolated(isolation, mode, event, env, in_place)
