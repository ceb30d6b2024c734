"""The modules a workspace's judged files provide, for the tripwire's "import of the tests' module".

pytest's naming tells most test modules by name (`test_*`, `conftest`, a `tests` package), but a helper
beside them (`tests/helpers.py`, imported as `helpers` once a test put `tests/` on the path) reads like
any module. A file the judge globs name (autod.act.judges) is the tests' whatever it is called, so
the names such files can be imported by (the file's stem, a package directory's name) count as the
tests' too. Read by walking the workspace, at most `MAX_FILES` entries, kept for `TTL_S` seconds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from autod.act.reach import introduced
from autod.safety.boundary import glob_match
from autod.walk import walk

__all__ = ["introduced_here", "provided"]

MAX_FILES = 50_000
TTL_S = 60.0
_SKIP = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox"})
_CACHE: dict[tuple[str, tuple[str, ...]], tuple[float, frozenset[str]]] = {}


def provided(workspace: Path, globs: tuple[str, ...]) -> frozenset[str]:
    """The top-level names the judged `.py` files of `workspace` are importable by: each file's stem,
    and for a package's `__init__.py` the package's directory name."""
    key = (str(workspace), globs)
    now = time.monotonic()
    hit = _CACHE.get(key)
    if hit is not None and now - hit[0] < TTL_S:
        return hit[1]
    names: set[str] = set()
    seen = 0
    for here, dirs, files in walk(workspace):
        dirs[:] = [d for d in dirs if d not in _SKIP and not d.endswith((".egg-info", ".dist-info"))]
        for name in files:
            seen += 1
            if not name.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(here, name), workspace).replace(os.sep, "/")
            if any(glob_match(g, rel) for g in globs):
                names.add(os.path.basename(here) if name == "__init__.py" else name[:-3])
        if seen >= MAX_FILES:
            break
    found = frozenset(names)
    _CACHE[key] = (now, found)
    return found


def introduced_here(old: str | None, new: str, globs: tuple[str, ...], workspace: Path | None) -> list[str]:
    """autod.act.reach.introduced, with the modules `workspace`'s judged files provide as the tests'."""
    judging: Callable[[str], bool] | None = None
    if workspace is not None:
        def judging(name: str) -> bool:
            return name.split(".")[0] in provided(workspace, globs)
    return introduced(old, new, judging)
