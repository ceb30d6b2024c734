"""Optional `git.commit: true`: commit each kept cycle, only the files autod edited."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from autod.act.edits import FileChange

if TYPE_CHECKING:
    from autod.cycle import Cycle

log = structlog.get_logger("autod.git")


def _git(workspace: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(workspace), *args], capture_output=True, input=input, timeout=60, check=False
    )


def committed_bytes(workspace: Path, rel: str) -> bytes | None:
    r = _git(workspace, "show", f"HEAD:{rel}")
    return r.stdout if r.returncode == 0 else None


def commit_changes(
    workspace: Path, changes: list[FileChange], summary: str, cycle_id: str
) -> dict[str, object]:
    """Commit what autod changed; a file someone else had changed stays uncommitted. Sync."""
    if not (workspace / ".git").exists():
        return {"committed": None, "skipped": [], "reason": "not a git repository"}
    mine, theirs = [], []
    for c in changes:
        # The file was clean before autod touched it only if its original equals HEAD's version.
        if c.old is not None and committed_bytes(workspace, c.rel) == c.old:
            mine.append(c.rel)
        else:
            theirs.append(c.rel)
    if not mine:
        return {
            "committed": None,
            "skipped": theirs,
            "reason": "every edited file had someone else's changes",
        }
    ident: list[str] = []
    if not _git(workspace, "config", "user.email").stdout.strip():
        ident = ["-c", "user.name=autod", "-c", "user.email=autod@localhost"]
    message = f"{summary.strip().splitlines()[0][:200]}\n\nAutod-Cycle: {cycle_id}\n"
    add = _git(workspace, "add", "--", *mine)
    if add.returncode != 0:
        return {"committed": None, "skipped": theirs, "reason": "git add failed"}
    r = _git(workspace, *ident, "commit", "--no-verify", "-q", "-F", "-", "--", *mine, input=message.encode())
    if r.returncode != 0:
        return {"committed": None, "skipped": theirs, "reason": "git commit failed"}
    rev = _git(workspace, "rev-parse", "HEAD").stdout.decode().strip()
    return {"committed": rev, "skipped": theirs, "reason": None}


async def commit_cycle(cycle: Cycle, changes: list[FileChange]) -> None:
    """Hook run after a cycle keeps its edits."""
    ws = cycle.settings.workspace
    result = await asyncio.to_thread(
        commit_changes, ws, list(changes), cycle.r.plan_summary or "autod edit", cycle.r.cycle_id
    )
    cycle.r.commit = result["committed"]  # type: ignore[assignment]
    if result["skipped"]:
        log.warning("left uncommitted: these files had changes by someone else", files=result["skipped"])
    if result["committed"]:
        log.info(
            "committed",
            commit=result["committed"],
            files=[c.rel for c in changes if c.rel not in result["skipped"]],
        )
    elif result["reason"]:
        log.info("not committed", reason=result["reason"])
