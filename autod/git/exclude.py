"""Keep autod's state dir out of `git status`: a line in the repository's `.git/info/exclude`.

Only when the state dir lies inside a git workspace; the line is added once (idempotent); `.gitignore`
is never touched (it belongs to the project). Worktrees share the main repository's info/exclude.
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from autod.git import safe as gitsafe
from autod.linebreaks import lines_of
from autod.safety.saferead import read_untrusted

log = structlog.get_logger("autod.daemon.supervisor")

MARK = "# autod's state dir (added by autod)"


def git_dir(workspace: Path) -> Path | None:
    """The directory holding info/exclude for this workspace, or None when it has no repository autod
    trusts (`gitsafe.repository`: never a planted or borrowed .git)."""
    try:
        gitdir, _ = gitsafe.repository(workspace)
    except gitsafe.GitRefused:
        return None
    common = gitdir / "commondir"  # a linked worktree: info/exclude lives in the main repository
    if common.is_file():
        try:
            rel = read_untrusted(common, cap=4096).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return gitdir
        return (gitdir / rel).resolve()
    return gitdir


def exclude_state_dir(workspace: Path, state_dir: Path) -> bool:
    """Add `/<state dir>/` to info/exclude if it is inside the workspace and not there yet; True if added."""
    try:
        rel = state_dir.resolve().relative_to(workspace.resolve())
    except ValueError:
        return False  # outside the workspace: git never sees it
    if not rel.parts:
        return False
    gitdir = git_dir(workspace)
    if gitdir is None:
        return False
    line = f"/{rel.as_posix()}/"
    exclude = gitdir / "info" / "exclude"
    try:
        text = read_untrusted(exclude, cap=1 << 20).decode("utf-8") if exclude.exists() else ""
        if line in lines_of(text):
            return False
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + f"{MARK}\n{line}\n")
            f.flush()
            os.fsync(f.fileno())
    except (OSError, UnicodeDecodeError) as exc:  # a read-only .git: status shows it, nothing breaks
        log.warning("git.exclude_failed", path=str(exclude), error=f"{type(exc).__name__}: {exc}")
        return False
    log.info("git.state_dir_excluded", path=str(exclude), line=line)
    return True
