"""Bytecode a check run wrote into the tree it ran on is removed when the run ends.

In a check's Python no module of the workspace is read from or written to bytecode (autod's import
guard, autod.checks.judge_guard; pytest's rewrite cache likewise, autod.checks.judge_plugin). So a
`.pyc` that appears or changes under the tree during a check run was written by something the check
ran, most likely the code under test: a cache whose header matches its source but whose code does not
(`def test_add(): pass` under `test_z.py`'s hash). autod's own checks never load it, but git ignores
it, so rolling the candidate back leaves it, and the operator's own `pytest` would load it. Removing
what a run wrote keeps the tree as the candidate found it.

A file is told apart by (inode, size, mtime, ctime): the ctime of a file changes with every write and
cannot be set back. The walk leaves out `.git` and virtual environments (read-only to the check) and
symlinks are never followed; a file is removed, never what a link points to.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from autod.checks import treewalk

__all__ = ["MAX_ENTRIES", "present", "remove_written"]

log = structlog.get_logger("autod.checks.run")

MAX_ENTRIES = 200_000  # directory entries walked; past this the tree is not looked at
_SUFFIXES = (".pyc", ".pyo")
_SKIP = frozenset({".git", "node_modules"})

Seen = dict[str, tuple[int, int, int, int]]


def present(root: Path, skip: Sequence[Path] = ()) -> Seen | None:
    """Every bytecode file under `root` with (inode, size, mtime, ctime); None when the tree is too
    large to walk (then nothing is removed)."""
    skipped = treewalk.identities(skip)

    def enter(e: os.DirEntry[str]) -> bool:  # not .git, not a virtual environment (read-only to a check)
        return (e.name not in _SKIP and treewalk.identity(e) not in skipped
                and not os.path.lexists(os.path.join(e.path, "pyvenv.cfg")))

    try:
        return {e.path: (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                for e, st in treewalk.files(str(root), enter, MAX_ENTRIES)
                if stat.S_ISREG(st.st_mode) and e.name.endswith(_SUFFIXES)}
    except treewalk.TooLarge:
        return None


def remove_written(root: Path, before: Mapping[str, tuple[int, int, int, int]] | None, check: str,
                   skip: Sequence[Path] = ()) -> list[str]:
    """Remove the bytecode files under `root` that are new or changed since `before` (what `present`
    found as the run began); the paths removed, relative to `root`."""
    if before is None:
        return []
    after = present(root, skip)
    if after is None:
        return []
    removed = []
    for path, seen in sorted(after.items()):
        if before.get(path) == seen:
            continue
        try:
            os.unlink(path)
        except OSError:
            continue
        removed.append(os.path.relpath(path, root))
    if removed:
        log.warning("check.bytecode_removed", check=check, files=removed[:20], count=len(removed),
                    why="a check's Python never writes the workspace's bytecode (autod's guard): the code"
                    " it ran did, and a .pyc is loaded in place of its source by Python and pytest")
    return removed
