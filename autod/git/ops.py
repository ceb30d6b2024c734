"""Optional `git.commit: true`: commit each kept cycle, only the files autod edited."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from autod import fsnames
from autod.act.edits import FileChange
from autod.git import safe as gitsafe
from autod.linebreaks import lines_of

if TYPE_CHECKING:
    from autod.events import Event
    from autod.reflection import Reflection

log = structlog.get_logger("autod.git")


def _git(workspace: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return gitsafe.run(workspace, *args, input=input, timeout=60)


def was_clean(workspace: Path, rel: str, before: bytes) -> bool:
    """Whether `before` (the file as autod found it) is HEAD's version and nothing of it is staged.

    Compared as git objects without filters: `hash-object --path` would run the repository's clean
    filter, i.e. its code. A checkout whose working files differ from their blobs (autocrlf, a
    filter) therefore counts as changed and is left uncommitted, which is the safe side.
    """
    head = _git(workspace, "rev-parse", "-q", "--verify", f"HEAD:{rel}")
    if head.returncode != 0:
        return False  # untracked, new, or no commit yet: not autod's to commit
    ours = _git(workspace, "hash-object", "--stdin", "--no-filters", input=before)
    if ours.returncode != 0 or ours.stdout.strip() != head.stdout.strip():
        return False
    # `git commit -- path` takes the working file: it would also commit over someone's staged change.
    return _git(workspace, "diff", "--cached", "--quiet", "HEAD", "--", rel).returncode == 0


def commit_changes(
    workspace: Path, changes: list[FileChange], summary: str, cycle_id: str
) -> dict[str, object]:
    """Commit what autod changed; a file someone else had changed stays uncommitted. Sync."""
    if not (workspace / ".git").exists():
        return {"committed": None, "skipped": [], "reason": "not a git repository"}
    mine, theirs = [], []
    for c in changes:
        if c.old is not None and was_clean(workspace, c.rel, c.old):
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
    message = f"{lines_of(summary.strip())[0][:200]}\n\nAutod-Cycle: {cycle_id}\n"
    add = _git(workspace, "add", "--", *mine)
    if add.returncode != 0:
        return {"committed": None, "skipped": theirs, "reason": "git add failed"}
    text = fsnames.shown(message).encode()  # what it quotes may name a file that is not UTF-8
    r = _git(workspace, *ident, "commit", "--no-verify", "-q", "-F", "-", "--", *mine, input=text)
    if r.returncode != 0:
        _git(workspace, "reset", "-q", "--", *mine)  # leave the index as it was
        tail = lines_of(r.stderr.decode("utf-8", "replace").strip())[-1:] or [""]
        return {"committed": None, "skipped": theirs, "reason": f"git commit failed: {tail[0][:200]}"}
    rev = _git(workspace, "rev-parse", "HEAD").stdout.decode().strip()
    return {"committed": rev, "skipped": theirs, "reason": None}


def commit_hook(workspace: Path) -> Callable[[Reflection, Event, str, list[FileChange]], Awaitable[None]]:
    """The cycle's after-keep hook for `git.commit: true`: commit what it kept in `workspace`."""

    async def commit(r: Reflection, event: Event, diff: str, changes: list[FileChange]) -> None:
        await commit_kept(workspace, r, changes)

    return commit


async def commit_kept(workspace: Path, r: Reflection, changes: list[FileChange]) -> None:
    """Commit a kept cycle's changes; the commit (or None) goes into its record `r`."""
    said = r.fix or r.plan_summary or "autod edit"  # from the diff first, not the model's prose
    try:
        result = await asyncio.to_thread(commit_changes, workspace, list(changes), said, r.cycle_id)
    except (OSError, subprocess.TimeoutExpired) as exc:  # the edits are kept either way
        log.warning("git.not_committed", reason="git did not run", error=type(exc).__name__)
        return
    r.commit = result["committed"]  # type: ignore[assignment]
    if result["skipped"]:
        log.warning(
            "git.left_uncommitted", reason="these files had changes by someone else", files=result["skipped"]
        )
    if result["committed"]:
        log.info(
            "git.committed",
            commit=result["committed"],
            files=[c.rel for c in changes if c.rel not in result["skipped"]],
        )
    elif result["reason"]:
        log.info("git.not_committed", reason=result["reason"])
