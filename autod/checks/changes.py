"""What a check run changed in the workspace: a snapshot before and after, and which of the changed
files are source (a verification that ran the check fails) or harmless output."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from autod.checks import sourcefiles, treewalk
from autod.paths import NOT_SOURCE_DIRS

if TYPE_CHECKING:
    from autod.config.settings import Settings

__all__ = ["CHANGED_SOURCES_MEANS", "UNTOLD", "changed_files", "runs_code", "snapshot", "sources_and_outputs"]

log = structlog.get_logger("autod.checks.run")

MAX_SNAPSHOT_ENTRIES = 60_000  # entries read; past this the change report is skipped rather than slow
UNTOLD = f"(the tree passed {MAX_SNAPSHOT_ENTRIES:,} entries during the run: what changed cannot be told)"


def snapshot(root: Path, skip: Sequence[Path] = ()) -> dict[str, tuple[int, ...]] | None:
    """(mtime, ctime, size, inode, mode) of every file under root, caches, venvs and .git left out;
    None when the tree is too large to be worth it. The ctime is what tells a file rewritten in place
    with its size and mtime put back (`os.utime`): no process can set it back."""
    skipped = treewalk.identities(skip)
    base = len(str(root)) + 1

    def enter(e: os.DirEntry[str]) -> bool:
        return e.name not in NOT_SOURCE_DIRS and treewalk.identity(e) not in skipped

    try:
        return {e.path[base:]: (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
                for e, st in treewalk.files(str(root), enter, MAX_SNAPSHOT_ENTRIES)}
    except treewalk.TooLarge:
        return None


def changed_files(before: Mapping[str, object] | None, after: Mapping[str, object] | None) -> list[str]:
    """The files that differ. A tree that was small enough to look at before the run and is not after
    it changed in a way that cannot be told (`UNTOLD`): counted as a change of its sources, since a
    check that floods the tree could otherwise hide a rewrite of one. Too large both times: not looked
    at (autod warns at start-up)."""
    if before is None and after is None:
        return []
    if before is None or after is None:
        return [UNTOLD]
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


CHANGED_SOURCES_MEANS = (
    "a fix verified by this check is rolled back, because autod cannot tell the check's change from"
    " its own: make the check read-only (run fixing commands as `fixer: true` checks); if these files"
    " are the check's own output, name them in the check's `outputs` globs (or .gitignore, for files"
    " Python does not load)"
)


async def sources_and_outputs(name: str, cwd: Path, changed: list[str], created: frozenset[str] = frozenset(),
                              globs: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Part what a check changed into the source it must not touch and its harmless output (`created`:
    what a candidate's run created, source unless git ignores it, autod.checks.planted; `globs`: the
    check's declared `outputs`)."""
    if UNTOLD in changed:
        log.warning("check.changed_files", check=name, files=[UNTOLD], count=1, means=CHANGED_SOURCES_MEANS,
                    decided_by="size")
        return [UNTOLD], []
    split = await asyncio.to_thread(sourcefiles.classify, cwd, changed, created, globs)
    if split.sources:
        # A check that fixes files by itself (ruff with `fix = true`) edits behind autod's journal.
        log.warning("check.changed_files", check=name, files=split.sources[:20], count=len(split.sources),
                    means=CHANGED_SOURCES_MEANS, decided_by=split.how)
    if split.outputs:
        log.debug("check.wrote_outputs", check=name, files=split.outputs[:20], count=len(split.outputs),
                  decided_by=split.how)
    return split.sources, split.outputs


def runs_code(changed: Sequence[str], settings: Settings | None) -> list[str]:
    """The changed files a plan could never have written (they make tools run code later, or hold
    credentials, like .envrc or .npmrc)."""
    from autod.safety.boundary import glob_match
    from autod.safety.protected import CREDENTIAL_GLOBS, RUNS_CODE_GLOBS

    allow = settings.limits.allow_globs if settings is not None else []
    globs = (*RUNS_CODE_GLOBS, *CREDENTIAL_GLOBS)
    hits = [f for f in changed if any(glob_match(g, f) for g in globs)]
    return [f for f in hits if not any(glob_match(a, f) for a in allow)]
