"""Turn a Plan into validated FileChanges: confinement, deny globs, search/replace, scope, caps.

Nothing here writes a file. `prepare` either returns every change of the plan or raises
PlanRejected naming the path and the rule, so an invalid plan is never partly applied.
Writing (atomic, journaled, reversible) is `autod.act.journal`; finding the search text is
`autod.act.search`; counting and showing changed lines is `autod.act.linediff`. Every step costs
time linear (or n log n) in the files it reads, so one plan cannot stall the daemon, and a set
`stop` event ends the work at the next edit (the daemon is stopping).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autod import pyast
from autod.act import linediff
from autod.act.definition import replace_definition
from autod.act.imports import add_missing_imports
from autod.act.quotes import requote
from autod.act.search import Stopped, apply_edit
from autod.safety.boundary import TMP_MARKER, Boundary, check_chain, glob_match
from autod.safety.filemodes import workspace_umask

__all__ = [
    "TMP_MARKER",
    "Boundary",
    "Caps",
    "FileChange",
    "ScopeCheck",
    "Stopped",
    "check_chain",
    "glob_match",
    "new_file_mode",
    "prepare",
    "unified_diff",
]
from autod.errors import PlanRejected

if TYPE_CHECKING:  # only the shape is used; keeps the actor's import light (crash-recovery at start-up)
    from autod.plan import Edit, Plan

# Reading is bounded even before the size cap applies, so a huge file cannot eat memory.
_READ_FACTOR = 4


@dataclass(frozen=True)
class Caps:
    max_edits: int  # edits in this plan (after the per-day remainder is applied by the caller)
    max_lines: int  # added + removed lines over the whole plan
    max_file_bytes: int  # no file may grow beyond this


@dataclass
class FileChange:
    rel: str  # normalised path relative to the workspace (posix)
    path: Path  # absolute real path inside the workspace
    old: bytes | None  # None: the file does not exist (creation)
    new: bytes
    mode: int | None  # permission bits of the original (kept on write); None for new files
    added: int  # lines added (autod.act.linediff over the decoded text)
    removed: int


ScopeCheck = Callable[[FileChange], None]


def prepare(
    plan: Plan,
    boundary: Boundary,
    caps: Caps,
    *,
    scope: ScopeCheck | None = None,
    stop: threading.Event | None = None,
) -> list[FileChange]:
    """Validate every edit of the plan and compute the resulting files; write nothing.

    Raises PlanRejected on the first broken rule: the edit cap, confinement, deny globs,
    search/replace, text-only and size, the mode's scope hook, then the line cap. Raises Stopped
    when `stop` is set (checked between steps).
    """
    # The cheap cap first: a plan of a thousand edits is refused before any file is read.
    if len(plan.edits) > caps.max_edits:
        raise PlanRejected(f"plan has {len(plan.edits)} edits, over the edit cap of {caps.max_edits}")
    originals: dict[str, tuple[Path, bytes | None, int | None]] = {}
    texts: dict[str, str | None] = {}
    order: list[str] = []
    for edit in plan.edits:
        _check(stop)
        rel, path = boundary.resolve(edit.path)
        if rel not in originals:
            old, mode = _read_original(rel, path, caps.max_file_bytes)
            originals[rel] = (path, old, mode)
            texts[rel] = None if old is None else _decode(rel, old)
            order.append(rel)
        if (edit.symbol or "").strip():  # a whole-definition edit
            texts[rel] = _replace_definition(rel, texts[rel], edit)
        else:
            texts[rel] = _apply_edit(rel, texts[rel], edit.search, edit.replace, stop)

    changes: list[FileChange] = []
    for rel in order:
        path, old, mode = originals[rel]
        text = texts[rel]
        if text is None:  # unreachable: every touched file has content after its edits
            raise PlanRejected(f"{rel}: no content after its edits")
        if rel.endswith(".py"):
            text = _python_artifacts(rel, old, text)
        new = text.encode("utf-8")
        if new == old:
            continue
        if len(new) > caps.max_file_bytes:
            raise PlanRejected(f"{rel}: would be {len(new)} bytes, over max_file_bytes {caps.max_file_bytes}")
        _check(stop)
        added, removed = linediff.count("" if old is None else old.decode("utf-8"), text)
        changes.append(FileChange(rel, path, old, new, mode, added, removed))

    if scope is not None:
        for change in changes:
            _check(stop)
            scope(change)

    lines = sum(c.added + c.removed for c in changes)
    if lines > caps.max_lines:
        raise PlanRejected(f"plan changes {lines} lines, over the line cap of {caps.max_lines}")
    return changes


def unified_diff(changes: Sequence[FileChange], *, context: int = 3) -> str:
    """A git-style unified diff (a/ and b/ prefixes) of the changes, for proposals and re-plan prompts."""
    out: list[str] = []
    for c in changes:
        old = [] if c.old is None else linediff.split_lines(c.old.decode("utf-8"))
        new = linediff.split_lines(c.new.decode("utf-8"))
        out.append(f"diff --git a/{c.rel} b/{c.rel}\n")
        if c.old is None:
            out.append(f"new file mode {0o100000 | new_file_mode():o}\n")
        fromfile = "/dev/null" if c.old is None else f"a/{c.rel}"
        for line in linediff.unified(old, new, fromfile, f"b/{c.rel}", n=context):
            if line.endswith("\n"):
                out.append(line)
            else:
                out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _read_original(rel: str, path: Path, max_bytes: int) -> tuple[bytes | None, int | None]:
    """Bytes and permission bits of the file now, or (None, None) if it does not exist."""
    try:
        # O_NOFOLLOW: a symlink swapped in after the confinement walk is refused, not followed;
        # O_NONBLOCK: a FIFO opens at once (and is refused below), never waits for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        raise PlanRejected(f"{rel}: cannot open ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PlanRejected(f"{rel}: not a regular file")
        limit = max_bytes * _READ_FACTOR
        if st.st_size > limit:
            raise PlanRejected(f"{rel}: {st.st_size} bytes, too large to edit (max_file_bytes {max_bytes})")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise PlanRejected(f"{rel}: too large to edit (max_file_bytes {max_bytes})")
        return data, stat.S_IMODE(st.st_mode)
    finally:
        os.close(fd)


def _decode(rel: str, data: bytes) -> str:
    if b"\x00" in data:
        raise PlanRejected(f"{rel}: binary file (NUL bytes), only UTF-8 text is edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanRejected(f"{rel}: not UTF-8 text, only UTF-8 text is edited") from None


def _apply_edit(rel: str, text: str | None, search: str, replace: str, stop: threading.Event | None) -> str:
    if "\x00" in replace:
        raise PlanRejected(f"{rel}: replacement text contains a NUL byte")
    if search == "":
        if text is not None:
            raise PlanRejected(f"{rel}: empty search creates a file, but the file already exists")
        return replace
    if text is None:
        raise PlanRejected(f"{rel}: file does not exist (use an empty search to create it)")
    return apply_edit(rel, text, search, replace, stop)


def _python_artifacts(rel: str, old: bytes | None, text: str) -> str:
    """Mechanical slips of a small model that cost a right fix, undone: an f-string re-quoted to nest
    its own quote (autod.act.quotes), a standard-library module used but not imported (act.imports)."""
    try:
        pyast.parse(text)
    except (SyntaxError, ValueError):
        text = requote(text) or text  # still broken: the syntax rule refuses it after
    before = None if old is None else old.decode("utf-8", "replace")
    return add_missing_imports(before, text, rel)


def _replace_definition(rel: str, text: str | None, edit: Edit) -> str:
    if text is None:
        raise PlanRejected(f"{rel}: file does not exist (a new file is an edit with an empty search)")
    if not rel.endswith(".py"):
        raise PlanRejected(f"{rel}: whole-definition edits are for Python files; use search/replace")
    if "\x00" in edit.replace:
        raise PlanRejected(f"{rel}: replacement text contains a NUL byte")
    assert edit.symbol is not None
    return replace_definition(rel, text, edit.symbol, edit.replace, edit.search)


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped()


def new_file_mode() -> int:
    """0o644 less the umask autod was started with: a new workspace file gets the workspace's usual mode
    (autod's own files are private under its umask 077, autod.safety.filemodes)."""
    return 0o644 & ~workspace_umask()
