"""What a candidate's check creates is never taken for harmless output, and is not left to load later.

A candidate is rolled back when its check changes the workspace's source (autod.checks.sourcefiles),
but git's word and a list of what Python or pytest loads kept missing the next planting: a
`tests/conftest.py` beside a `.gitignore` naming it, a package `src/calc/` shadowing `calc.py`, a
root `pyproject.toml` whose `pythonpath` and `-p` load a plugin from a planted zip, a `test_a.txt`
pytest collects as a doctest (probes of the seventh session; each made every later run of the bug
`fixed`). So, for a run of a candidate's check (`CANDIDATE_FILES` set):

- every file it created that git does not ignore is a changed source (`created`, read by
  autod.checks.changes): the run before made the project's usual output already, so a candidate's run
  only changes it; what Python or pytest loads counts wherever it lies, ignored or not;
- on the mirror (the default with bubblewrap), every file it created is removed after the run (the
  mirror is autod's own; its next sync would remove them too);
- in the operator's tree (verifying in place) nothing is removed: a file that appeared during the run
  may be one the operator just saved, and timing cannot tell who made it. The candidate is rolled back
  (what it created is source), and the files are named in an error (`check.created_files_left`) to
  review. A probe's operator saved three files during an in-place run, and an earlier version of this
  module deleted them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import structlog

from autod.checks.pertest import CANDIDATE_FILES

__all__ = ["after_run", "created"]

log = structlog.get_logger("autod.checks.run")


def created(before: Mapping[str, object] | None, after: Mapping[str, object] | None) -> frozenset[str]:
    """The files a candidate's check run created (relative paths); empty for any other run."""
    if not CANDIDATE_FILES.get() or before is None or after is None:
        return frozenset()
    return frozenset(after.keys() - before.keys())


def after_run(cwd: Path, before: Mapping[str, object] | None, after: Mapping[str, object] | None,
              check: str, *, in_place: bool) -> list[str]:
    """Blocking: after a candidate's run, remove what it created on the mirror (the paths removed), or
    name it in the operator's tree."""
    made = sorted(created(before, after))
    if not made:
        return []
    if in_place:
        log.error("check.created_files_left", check=check, files=made[:20], count=len(made),
                  fix="a candidate's check created these files in your tree during its verification:"
                  " review them and remove what you did not write")
        return []
    removed = []
    for rel in made:
        try:
            os.unlink(cwd / rel)  # a link is removed, never followed
        except OSError:
            continue
        removed.append(rel)
    return removed
