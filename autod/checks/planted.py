"""What a candidate's check left behind for later runs to load is taken away, as its bytecode is.

A candidate is rolled back when its check changes the workspace's source (autod.checks.sourcefiles),
but a file the check *created* is in no journal and stayed: a `tests/conftest.py`, a `src/calc/`
package that shadows `src/calc.py`, a `.pth`, each made every later run of the bug pass (a probe of
the seventh session). So after each run of a candidate's check, every file it created that Python or
pytest loads on a later run (`sourcefiles.loaded_later`) is removed, the way `bytecode.remove_written`
removes the `.pyc` files. A run that is not a candidate's (the run before, a plain check) keeps what
it made: that is the project's own doing, and the operator is told of it (`check.changed_files`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import structlog

from autod.checks.sourcefiles import loaded_later

__all__ = ["remove_created"]

log = structlog.get_logger("autod.checks.run")


def remove_created(root: Path, before: Mapping[str, object] | None, after: Mapping[str, object] | None,
                   check: str) -> list[str]:
    """Remove the files under `root` that are in `after` and not in `before` (snapshots, relative
    paths) and that a later run would load; the paths removed. Blocking. A link is removed, never
    followed."""
    if before is None or after is None:
        return []
    removed = []
    for rel in sorted(after.keys() - before.keys()):
        if not loaded_later(rel):
            continue
        try:
            os.unlink(root / rel)
        except OSError:
            continue
        removed.append(rel)
    if removed:
        log.warning("check.created_code_removed", check=check, files=removed[:20], count=len(removed),
                    why="a candidate's check created files Python or pytest would load on a later run")
    return removed
