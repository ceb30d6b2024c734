"""Which of the files a check wrote are the workspace's source, and which are only its output.

Checks write files as they run: coverage reports (`htmlcov/`, `.coverage`, `coverage.xml`), logs,
caches, build output. Those are not the code under test, so they never fail a verification or roll
back a fix. A check that changes the *source* does: its change is in no journal, so autod could
neither take it back nor tell it from the fix. The rule, asked of git (through `autod.git.safe`: no
hooks, filters or fsmonitor, each call under a deadline):

- a file git tracks (it is in the index) is source, whatever the check did to it;
- a file Python or pytest loads on a later run (`loaded_later`: `.py`, `.pth`, `.so`, ..., pytest's
  configuration and entry points) is source wherever it lies, whatever git says of it, and so is a
  `.gitignore`, which decides what git says: a probe's check wrote `tests/conftest.py` beside a
  `tests/.gitignore` naming it, `src/calc/__init__.py` (a package that shadows `calc.py`) and
  `tests/test_zz/conftest.py` in new directories, and each of them made every later run of the bug
  pass while counted as output. Only build output directories (`build/`, `dist/`, `.eggs/`) are left
  to git's word: pytest does not collect there and nothing imports from there unasked;
- a file git ignores is output;
- any other file (git neither tracks nor ignores it) is source only when it lies in a directory that
  holds tracked files and looks like the source there: it has the suffix of a tracked file in that
  directory (a new fixture beside the tracked ones), or it is something Python loads on a later run
  (`.py`, `.pyi`, `.pth`, `.so`, `.pyd`: a `conftest.py` dropped at the root is source). Anything
  else (`coverage.xml` at the root, a new `reports/` directory) is output.

Without git (not a repository, git missing, or slower than its deadline) tracked and untracked cannot
be told apart: a changed file Python would load is source, anything else is output.

The operator's word (`checks.<name>.outputs`, globs): a project whose own check generates Python
(a parser's tables, an extension built in place) into a directory git ignores would otherwise have
every run counted as changing its source, and every fix rolled back. A file a check's `outputs` globs
name is output, unless git tracks it (a fix's own files never hide there) or it is pytest's
configuration or entry points or a `.gitignore` (`never_declared`: those decide what the tests are and
how they are judged, whoever declares them).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import structlog

from autod.git import safe as gitsafe
from autod.paths import GENERATED_DIRS
from autod.safety.boundary import glob_match
from autod.safety.protected import RUNNER_GLOBS

log = structlog.get_logger("autod.checks.sourcefiles")

GIT_TIMEOUT_S = 10.0  # each git call; gitsafe adds its own bounded read of the repository's config
# What Python may import or execute on a later run, wherever it lies in a source directory.
PYTHON_LOADS = frozenset({".py", ".pyi", ".pth", ".so", ".pyd"})


@dataclass(frozen=True)
class Split:
    """Changed paths (relative to the workspace) parted into source and output; `how` says by what."""

    sources: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    how: str = "git"  # "git", or "no git: <why>" when the fallback rule decided


def _suffix(path: str) -> str:
    return PurePosixPath(path).suffix.lower()


def _parent(path: str) -> str:
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent


def loaded_later(path: str) -> bool:
    """Whether Python or pytest loads the file on a later run (or it decides what git ignores), outside
    build output directories."""
    pure = PurePosixPath(path)
    if any(part in GENERATED_DIRS for part in pure.parts[:-1]):
        return False
    return (_suffix(path) in PYTHON_LOADS or pure.name == ".gitignore"
            or any(glob_match(g, path) for g in RUNNER_GLOBS))


def never_declared(path: str) -> bool:
    """Whether no `outputs` glob can make the file output: pytest's configuration and entry points,
    and a `.gitignore`."""
    pure = PurePosixPath(path)
    return pure.name == ".gitignore" or any(glob_match(g, path) for g in RUNNER_GLOBS)


def declared(path: str, globs: Sequence[str]) -> bool:
    """Whether the operator named the file as a check's output (`checks.<name>.outputs`)."""
    return bool(globs) and any(glob_match(g, path) for g in globs) and not never_declared(path)


def fallback(paths: Sequence[str], why: str, created: frozenset[str] = frozenset(),
             globs: Sequence[str] = ()) -> Split:
    """Without git: what Python would load, and what a candidate's check created, is source unless the
    check's `outputs` name it; the rest output."""
    sources = [p for p in paths if (loaded_later(p) or p in created) and not declared(p, globs)]
    return Split(sources, [p for p in paths if p not in set(sources)], f"no git: {why}")


def by_rule(paths: Sequence[str], tracked: set[str], ignored: set[str],
            created: frozenset[str] = frozenset(), globs: Sequence[str] = ()) -> Split:
    """The rule above, given what git tracks and which of the untracked paths it ignores (`created`:
    what a candidate's check created, source unless ignored, autod.checks.planted; `globs`: the
    check's declared `outputs`)."""
    suffixes: dict[str, set[str]] = {}  # directory -> suffixes of the tracked files in it
    for t in tracked:
        suffixes.setdefault(_parent(t), set()).add(_suffix(t))
    sources, outputs = [], []
    for p in paths:
        if p not in tracked and declared(p, globs):
            outputs.append(p)
            continue
        if p in tracked or loaded_later(p):
            sources.append(p)
            continue
        if p in ignored:
            outputs.append(p)
            continue
        if p in created:
            sources.append(p)
            continue
        here = suffixes.get(_parent(p))
        sfx = _suffix(p)
        if here is not None and sfx and (sfx in here or sfx in PYTHON_LOADS):
            sources.append(p)
        else:
            outputs.append(p)
    return Split(sources, outputs)


def _git(workspace: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return gitsafe.run(workspace, *args, input=input, timeout=GIT_TIMEOUT_S)


def classify(workspace: Path, paths: Sequence[str], created: frozenset[str] = frozenset(),
             globs: Sequence[str] = ()) -> Split:
    """Part `paths` (relative to `workspace`) into source and output (blocking: run it in a thread);
    `created`: what a candidate's check created, source unless git ignores it; `globs`: the check's
    declared `outputs`."""
    if not paths:
        return Split()
    try:
        listed = _git(workspace, "ls-files", "-z", "--cached")
        if listed.returncode != 0:
            return fallback(paths, "not a git repository", created, globs)
        tracked = {p for p in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if p}
        untracked = [p for p in paths if p not in tracked]
        ignored: set[str] = set()
        if untracked:
            data = "\0".join(untracked).encode("utf-8", "surrogateescape") + b"\0"
            checked = _git(workspace, "check-ignore", "-z", "--stdin", input=data)
            if checked.returncode not in (0, 1):  # 1: none of them is ignored
                return fallback(paths, f"git check-ignore exited {checked.returncode}", created, globs)
            ignored = {p for p in checked.stdout.decode("utf-8", "surrogateescape").split("\0") if p}
    except subprocess.TimeoutExpired:
        return fallback(paths, f"git took longer than {GIT_TIMEOUT_S:g}s", created, globs)
    except OSError as exc:  # git missing, or a repository config gitsafe refuses (GitRefused)
        return fallback(paths, f"{type(exc).__name__}: {str(exc)[:200]}", created, globs)
    return by_rule(paths, tracked, ignored, created, globs)
