"""Verify edits away from the operator's working tree.

`Isolation` owns the workspace's mirror (`mirror.Mirror`, under `<state_dir>/mirror/`): `stage()`
brings it in step with the workspace and writes a candidate's files into it, and `run_check()` runs a
configured check on it, sandboxed and mounted at the workspace's own path, so the operator's tree is
never written and never shows a candidate. Without bubblewrap there is no way to show the copy at the
workspace's path (an editable install or an absolute path would reach the real tree), so isolation is
then unavailable and callers fall back to verifying in place, through the journal, saying so.

A crash or kill -9 mid-verification leaves the working tree untouched (nothing of a candidate is ever
written there) and the mirror is removed at the next start (`recover`).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from autod.isolation.mirror import Mirror, Stopped, SyncStats, TooLarge
from autod.walk import remove_tree

if TYPE_CHECKING:
    from autod.checks.run import CheckResult
    from autod.config.settings import Settings

__all__ = ["Isolation", "Mirror", "Stopped", "SyncStats", "TooLarge", "mirror_dir", "recover"]

log = structlog.get_logger("autod.isolation")


def mirror_dir(settings: Settings) -> Path:
    return settings.state_path / "mirror"


def recover(settings: Settings) -> bool:
    """At start-up: remove a mirror a previous process left (it may hold a candidate). Blocking."""
    root = mirror_dir(settings)
    if not root.exists():
        return False
    remove_tree(root)
    log.info("isolation.mirror_removed", path=str(root), reason="left by a previous run")
    return True


class Isolation:
    """The mirror of one workspace and the checks run on it. One per daemon (rebuilt on reload)."""

    def __init__(self, settings: Settings) -> None:
        from autod.checks.sandbox import Policy

        self.settings = settings
        cfg = settings.candidates
        policy = Policy.for_settings(settings, settings.workspace)
        skip = [settings.state_path, *policy.hidden]
        self.mirror = Mirror(
            settings.workspace,
            mirror_dir(settings) / "tree",
            skip=skip,
            max_files=cfg.mirror_max_files,
            max_bytes=cfg.mirror_max_mb << 20,
        )
        self._lock = asyncio.Lock()
        self._too_large: str | None = None
        self.last_sync: SyncStats | None = None

    async def unavailable(self) -> str | None:
        """Why candidates cannot be verified in isolation here, or None when they can."""
        from autod.checks import sandbox

        s = self.settings
        if s.candidates.isolation == "off":
            return "candidates.isolation is off"
        if s.checks_sandbox == "off" or any(c.sandbox == "off" for c in s.checks.values()):
            return "a check runs with sandbox: off (isolation mounts the copy through bwrap)"
        verdict = sandbox.cached_verdict() or await asyncio.to_thread(sandbox.probe)
        if not verdict.works:
            return f"the bwrap sandbox does not work here ({verdict.why})"
        return self._too_large

    async def stage(self, files: dict[str, bytes], modes: dict[str, int | None] | None = None) -> Path:
        """The mirror, in step with the workspace, with `files` (relative path -> bytes) written in.

        Raises TooLarge (isolation is then unavailable for this workspace until a reload).
        """
        stop = threading.Event()

        def work() -> SyncStats:
            stats = self.mirror.sync(stop)
            self.mirror.write(files, modes)
            return stats

        async with self._lock:
            try:
                self.last_sync = await asyncio.to_thread(work)
            except TooLarge as exc:
                self._too_large = f"the workspace is too large to mirror: {exc}"
                log.warning("isolation.too_large", reason=str(exc))
                raise
            except asyncio.CancelledError:
                stop.set()
                raise
        return self.mirror.root

    async def restore(self) -> None:
        """Take a candidate's files out of the mirror again (a sync; cheap after a stage)."""
        async with self._lock:
            await asyncio.to_thread(self.mirror.sync)

    async def run_check(
        self, name: str, *, run: str | None = None, timeout_s: float | None = None, **extra: Any
    ) -> CheckResult:
        """A configured check (or its focus command) on the mirror; never counted as the tree's result.
        `timeout_s`: a shorter deadline than the check's own (a candidate's, autod.candidates.validate)."""
        from autod.checks.run import run_check

        check = self.settings.checks[name]
        if run is not None:
            check = check.model_copy(update={"run": run})
        if timeout_s is not None and timeout_s < check.timeout_s:
            check = check.model_copy(update={"timeout_s": timeout_s})
        return await run_check(
            name,
            check,
            self.mirror.root,
            settings=self.settings,
            mount_at=self.settings.workspace,
            bind_back=self.mirror.bind_back,
            **extra,
        )

    def discard(self) -> None:
        """Drop the mirror (blocking): after a stop mid-verification, or on reload."""
        self.mirror.reset()
