"""What a check run means beyond its own result.

Every run (by the check source, a probe, or verification inside a cycle) is recorded here. A run
that counts (see `autod.runtime.freshness.CheckLedger`) has consequences: a check that passes
resolves every failure it had, so their quarantine lifts and the proposals made for them are
withdrawn; all checks green marks the revision the debug prompt diffs against; and a failure that a
kept cycle's verification found, other than the one the cycle worked on, becomes an event of its own
(nothing else would report it: autod's own writes do not trigger the watcher).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from autod.candidates.validate import PASSING_MS_KEY
from autod.checks.run import CheckResult
from autod.checks.source import failure_event, result_fingerprint
from autod.events import Event
from autod.git import safe as gitsafe
from autod.runtime.freshness import CheckLedger, Run
from autod.stores.state import State

log = structlog.get_logger("autod.runtime.checkbook")

class CheckBook:
    def __init__(
        self,
        workspace: Path,
        state: State,
        accept: Callable[[Event], Awaitable[None]],
        on_pass: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.workspace = workspace
        self.state = state
        self.accept = accept
        self.on_pass = on_pass  # a check passed: events still queued for its failures are old news
        self.ledger = CheckLedger()

    @property
    def results(self) -> dict[str, CheckResult]:
        """The latest result of each check that counts (one dict, updated in place)."""
        return self.ledger.results

    def errors(self) -> dict[str, str]:
        """Checks whose latest run could not start: configuration errors for `status`."""
        return {name: run.error for name, run in self.ledger.runs.items() if run.error}

    async def record(self, result: CheckResult, at: float) -> Run:
        # Called with the workspace lock held, so a cycle that takes it next sees this run; the output
        # is parsed in a worker thread (untrusted and possibly long), never on the loop.
        failing = not result.ok and not result.error
        fp = await asyncio.to_thread(result_fingerprint, result) if failing else None
        run = Run(result.name, at, result.ok, fp, result.error)
        counted = self.ledger.record(run, result)
        if counted:
            await self.counted(counted, None)
        return run

    async def counted(self, runs: list[Run], event: Event | None) -> None:
        """Runs that now describe the workspace; `event` is the one a kept cycle worked on, if any."""
        for run in runs:
            if run.ok:
                await self._passed(run)
            elif event is not None and run.fingerprint and run.fingerprint != event.fingerprint:
                result = self.ledger.results[run.check]
                follow = await asyncio.to_thread(failure_event, result, checked_at=run.at)
                log.info("check.failure_left", check=run.check, fingerprint=follow.fingerprint,
                         after=event.fingerprint)
                await self.accept(follow)
        if runs and self.results and all(r.ok for r in self.results.values()):
            rev = await _git_head(self.workspace)
            if rev:
                await self.state.call(self.state.set_kv, "last_green_rev", rev)

    async def _passed(self, run: Run) -> None:
        result = self.ledger.results.get(run.check)
        if result is not None and result.duration_ms > 0:  # a candidate's check deadline reads it
            await self.state.call(self.state.set_kv, f"{PASSING_MS_KEY}{run.check}", result.duration_ms)
        lifted = await self.state.call(self.state.check_passed, run.check)
        for fp in lifted:
            log.info("quarantine.lifted", fingerprint=fp, check=run.check, reason="its check passed")
        withdrawn = await self.state.call(
            self.state.withdraw_proposals, f"check {run.check} passed", check=run.check
        )
        for pid in withdrawn:
            log.info("proposal.withdrawn", proposal_id=pid, check=run.check, reason="its check passed")
        if self.on_pass is not None:
            await self.on_pass(run.check)


async def _git_head(workspace: Path) -> str | None:
    if not (workspace / ".git").exists():
        return None
    try:  # git as a tool: none of the repository's hooks, filters or fsmonitor (autod.git.safe)
        proc = await gitsafe.arun(workspace, "rev-parse", "HEAD", timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    rev = proc.stdout.decode().strip()
    return rev if proc.returncode == 0 and rev else None
