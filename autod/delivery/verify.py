"""Verifying a fix that goes to a branch or a patch, without writing the operator's working tree: on the
workspace's mirror (autod.isolation), set back to HEAD for every tracked file the working tree changes,
with the fix on top, the mode's own verification runs (its checks, focus first), mounted at the
workspace's path by bwrap. Its check runs describe the mirror, so they never count as the tree's results.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from autod.delivery.rebase import OnHead
from autod.modes import Mode, ModeEnv, Verification
from autod.modes.verifying import unjournaled

if TYPE_CHECKING:
    from autod.events import Event
    from autod.isolation import Isolation
    from autod.plan import Plan


class Verifier(Protocol):
    """Verifies `fix` (HEAD with the fix) somewhere that is not the operator's working tree."""

    async def unavailable(self) -> str | None:
        """Why it cannot verify here (then nothing is delivered), or None."""
        ...

    async def verify(
        self, mode: Mode, event: Event, plan: Plan, fix: OnHead, env: ModeEnv
    ) -> Verification: ...


class MirrorVerifier:
    """The Verifier on autod.isolation's mirror."""

    def __init__(self, isolation: Isolation) -> None:
        self.isolation = isolation

    async def unavailable(self) -> str | None:
        return await self.isolation.unavailable()

    async def verify(self, mode: Mode, event: Event, plan: Plan, fix: OnHead, env: ModeEnv) -> Verification:
        staged = {**fix.head_view, **fix.files}
        files = {rel: b.data for rel, b in staged.items()}
        modes = {rel: (0o755 if b.mode == "100755" else 0o644) for rel, b in staged.items()}
        await self.isolation.stage(files, modes)
        try:
            mirror_env = dataclasses.replace(env, run_check=self.isolation.run_check)
            # a check that writes files makes the verdict unreliable, in the mirror as in the tree
            return unjournaled(await mode.verify(event, plan, mirror_env))
        finally:
            await self.isolation.restore()
