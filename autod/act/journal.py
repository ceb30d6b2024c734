"""The cycle's journal of originals, atomic writes, rollback and crash recovery.

Layout: ``state_dir/journal/<cycle_id>/`` holds ``<n>.orig`` (copies of the originals),
``manifest.json`` (what will be written) and, once the cycle keeps its edits, ``kept``.

The crash-safety argument, step by step:
1. Originals are copied and fsynced, then the manifest is written atomically. Until the
   manifest exists no workspace file has been touched, so a dir without one is just removed.
2. Each file is written to a temp file in its own directory, fsynced, then renamed over the
   target: at any instant the file holds either its old or its new bytes, never a mix.
3. Rollback compares each file's sha256 with the manifest: original -> nothing to do, planned
   -> restore (same temp+rename) or delete a created file. So it can be re-run after a crash
   at any point of apply() or of itself.
4. ``kept`` is written atomically before the dir is removed: with it, recovery keeps the
   edits; without it, recovery rolls them back.
A file that holds neither the original nor the planned bytes was changed by someone else;
rollback leaves it alone (and logs it) rather than destroy that change.

No lost save: every workspace write goes through `autod.act.atomic.swap_in`, which never replaces
a file that changed since it was checked (the user's save wins and the plan is refused). Rollback
restores the same way, and removes a file it created by moving it aside first and checking what it
moved. The outcome is honest: `restored` and `left` name the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from autod import atomicfile
from autod.act import atomic
from autod.act.edits import FileChange, check_chain, new_file_mode
from autod.atomicfile import OnWrite
from autod.errors import PlanRejected

log = structlog.get_logger(__name__)

MANIFEST = "manifest.json"
KEPT = "kept"
_CYCLE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")
_CHANGED_BY_OTHERS = "changed by someone else since autod wrote it; left as is"


@dataclass
class _Entry:
    rel: str
    existed: bool
    mode: int | None
    orig_sha256: str | None
    new_sha256: str
    orig: str | None  # name of the saved copy in the journal dir
    created_dirs: list[str] = field(default_factory=list)  # made for a creation, shallow to deep


class _ChangedMeanwhile(Exception):
    def __init__(self, rel: str) -> None:
        self.rel = rel


@dataclass
class RollbackOutcome:
    """What a rollback did: files now as they were, and files it left because someone changed them."""

    restored: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)

    def record(self) -> dict[str, list[str]]:
        return {"restored": list(self.restored), "left": list(self.left)}


class Journal:
    """The cycle's record of originals: state_dir/journal/<cycle_id>/ ."""

    def __init__(self, directory: Path, workspace: Path | None = None, entries: list[_Entry] | None = None):
        self.dir = directory
        self._workspace = workspace
        self._entries = entries or []
        self._changes: list[FileChange] = []
        self._state = "applied" if entries else "begun"  # begun | applied | rolled_back | kept
        self.outcome: RollbackOutcome | None = None  # set by the first rollback()

    @classmethod
    def begin(cls, state_dir: Path, cycle_id: str) -> Journal:
        """Create the cycle's empty journal dir (mode 0700)."""
        if not _CYCLE_ID.match(cycle_id):
            raise ValueError(f"cycle id not usable as a directory name: {cycle_id!r}")
        root = Path(state_dir) / "journal"
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = root / cycle_id
        directory.mkdir(mode=0o700)
        atomicfile.fsync_dir(root)
        return cls(directory)

    @property
    def changes(self) -> list[FileChange]:
        """The changes handed to apply() (empty for a journal loaded by recover())."""
        return list(self._changes)

    def apply(self, changes: Sequence[FileChange], *, on_write: OnWrite | None = None) -> None:
        """Save the originals, then write every change atomically; on any failure roll back and re-raise.

        Raises PlanRejected if a file no longer holds what prepare() read (edited meanwhile).
        """
        if self._state != "begun":
            raise RuntimeError(f"journal {self.dir.name} is {self._state}; apply() runs once")
        if len({c.rel for c in changes}) != len(changes):
            raise ValueError("one FileChange per file: the same path appears twice")
        self._changes = list(changes)
        if not changes:
            self._state = "applied"
            return
        workspace = _workspace_of(changes[0])
        if any(_workspace_of(c) != workspace for c in changes):
            raise ValueError("all changes must be inside one workspace")
        self._workspace = workspace
        self._entries = self._save_originals(changes, workspace)
        # From here on rollback() is the way back, whatever happens.
        self._state = "applied"
        try:
            for change in changes:
                self._write_one(change, workspace, on_write)
        except _ChangedMeanwhile as e:
            self.rollback(on_write=on_write)
            raise PlanRejected(
                f"{e.rel}: changed while the plan was applied (someone saved it; their version is kept); "
                "every edit of the plan was rolled back"
            ) from None
        except BaseException:
            try:
                self.rollback(on_write=on_write)
            except Exception:  # the journal stays on disk; recover() finishes at next start
                log.exception("act.rollback_failed", journal=str(self.dir))
            raise

    def rollback(self, *, on_write: OnWrite | None = None) -> list[str]:
        """Restore every original (delete created files); return the rels now as they were. Idempotent."""
        if self._state == "kept":
            raise RuntimeError(f"journal {self.dir.name} was kept; its edits are final")
        if self._state == "rolled_back":
            return []
        outcome = RollbackOutcome()
        if self._entries and self._workspace is not None:
            outcome = _rollback_entries(self._workspace, self.dir, self._entries, on_write)
        _remove_journal_dir(self.dir)
        self._state = "rolled_back"
        self.outcome = outcome
        return outcome.restored

    def keep(self) -> None:
        """The edits are final: mark kept, then remove the journal dir."""
        if self._state == "rolled_back":
            raise RuntimeError(f"journal {self.dir.name} was rolled back; nothing to keep")
        if self._state == "kept":
            return
        atomicfile.atomic_write(self.dir / KEPT, b"kept\n", 0o600)
        self._state = "kept"
        _remove_journal_dir(self.dir)

    def _save_originals(self, changes: Sequence[FileChange], workspace: Path) -> list[_Entry]:
        entries: list[_Entry] = []
        for n, change in enumerate(changes):
            orig = None
            if change.old is not None:
                orig = f"{n}.orig"
                atomicfile.write_new_file(self.dir / orig, change.old, 0o600)
            entries.append(
                _Entry(
                    rel=change.rel,
                    existed=change.old is not None,
                    mode=change.mode,
                    orig_sha256=atomic.sha(change.old),
                    new_sha256=atomic.sha(change.new) or "",
                    orig=orig,
                    created_dirs=_missing_parents(workspace, change.rel) if change.old is None else [],
                )
            )
        manifest = {
            "version": 1,
            "cycle_id": self.dir.name,
            "workspace": str(workspace),
            "entries": [e.__dict__ for e in entries],
        }
        atomicfile.fsync_dir(self.dir)  # the .orig names are durable before the manifest points at them
        atomicfile.atomic_write(self.dir / MANIFEST, json.dumps(manifest, indent=1).encode(), 0o600)
        return entries

    def _write_one(self, change: FileChange, workspace: Path, on_write: OnWrite | None) -> None:
        check_chain(workspace, change.rel)  # a symlink swapped in since prepare() is refused
        if atomic.read_current(change.path) != change.old:
            raise _ChangedMeanwhile(change.rel)
        if change.old is None:
            _make_parents(workspace, change.rel)
        mode = change.mode if change.mode is not None else new_file_mode()
        try:
            atomic.swap_in(change.path, change.new, mode, expected=atomic.sha(change.old), on_write=on_write)
        except atomic.Displaced:
            raise _ChangedMeanwhile(change.rel) from None


def recover(state_dir: Path, workspace: Path, *, on_write: OnWrite | None = None) -> list[str]:
    """At start-up: roll back every journal a crash left (kept ones are just removed); return their ids."""
    root = Path(state_dir) / "journal"
    if not root.is_dir():
        return []
    real_ws = Path(os.path.realpath(workspace))
    recovered: list[str] = []
    for directory in sorted(root.iterdir()):
        if directory.is_symlink() or not directory.is_dir():
            continue
        if (directory / KEPT).exists() or not (directory / MANIFEST).exists():
            # Kept: the edits are final. No manifest: nothing in the workspace was touched yet.
            _remove_journal_dir(directory)
            recovered.append(directory.name)
            continue
        try:
            manifest = json.loads((directory / MANIFEST).read_bytes())
            entries = [_Entry(**e) for e in manifest["entries"]]
            recorded_ws = Path(manifest["workspace"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.error("act.journal_unreadable", journal=str(directory), error=str(e))
            continue
        if Path(os.path.realpath(recorded_ws)) != real_ws:
            # Rolling back into another tree would be wrong; keep the originals for the operator.
            log.error("act.journal_other_workspace", journal=str(directory), workspace=str(recorded_ws))
            continue
        journal = Journal(directory, real_ws, entries)
        restored = journal.rollback(on_write=on_write)
        left = journal.outcome.left if journal.outcome else []
        log.warning("act.recovered", cycle_id=directory.name, restored=restored, left=left)
        recovered.append(directory.name)
    return recovered


def _rollback_entries(
    workspace: Path, directory: Path, entries: list[_Entry], on_write: OnWrite | None
) -> RollbackOutcome:
    outcome = RollbackOutcome()
    for entry in reversed(entries):
        path = workspace / entry.rel
        _remove_temp_leftovers(path)
        try:
            check_chain(workspace, entry.rel)
            current = atomic.read_current(path)
        except (PlanRejected, OSError) as e:
            log.warning("act.rollback_skipped", path=entry.rel, reason=str(e))
            outcome.left.append(entry.rel)
            continue
        digest = atomic.sha(current)
        try:
            if entry.existed:
                if current is not None and digest == entry.orig_sha256:
                    pass  # already as it was
                elif current is None or digest == entry.new_sha256:
                    _restore(path, directory, entry, digest, on_write)
                else:
                    raise atomic.Displaced()
            else:
                if current is not None and digest != entry.new_sha256:
                    raise atomic.Displaced()
                if current is not None:
                    if on_write is not None:
                        on_write(path, None)
                    _remove_created(path, entry.new_sha256)
                for rel_dir in reversed(entry.created_dirs):
                    with contextlib.suppress(OSError):  # not empty (or already gone): leave it
                        os.rmdir(workspace / rel_dir)
        except atomic.Displaced:
            log.warning("act.rollback_skipped", path=entry.rel, reason=_CHANGED_BY_OTHERS)
            outcome.left.append(entry.rel)
            continue
        outcome.restored.append(entry.rel)
    outcome.restored.reverse()
    outcome.left.reverse()
    return outcome


def _restore(
    path: Path, directory: Path, entry: _Entry, current: str | None, on_write: OnWrite | None
) -> None:
    if entry.orig is None:
        raise ValueError(f"journal {directory.name}: {entry.rel} has no saved original")
    data = (directory / entry.orig).read_bytes()
    if atomic.sha(data) != entry.orig_sha256:
        raise ValueError(f"journal {directory.name}: saved original of {entry.rel} is corrupt")
    mode = entry.mode if entry.mode is not None else new_file_mode()
    atomic.swap_in(path, data, mode, expected=current, on_write=on_write)


def _remove_created(path: Path, ours: str) -> None:
    """Delete a file autod created, unless it changed: moved aside first, so a save cannot slip in."""
    aside = path.parent / f"{atomicfile.tmp_prefix(path.name)}{secrets.token_hex(6)}"
    os.rename(path, aside)
    try:
        if atomic.sha(atomic.read_current(aside)) == ours:
            os.unlink(aside)
            atomicfile.fsync_dir(path.parent)
            return
    except BaseException:
        _place_back(aside, path)
        raise
    _place_back(aside, path)  # someone wrote to it between the check and the move: theirs stays
    raise atomic.Displaced()


def _place_back(aside: Path, path: Path) -> None:
    if not atomic.place_new(aside, path):  # the path was re-created meanwhile: keep both, never overwrite
        kept = path.parent / f"{path.name}.autod-saved-{secrets.token_hex(4)}"
        os.rename(aside, kept)
        why = f"a newer file took its place; the moved one is kept as {kept.name}"
        log.warning("act.rollback_skipped", path=str(path), reason=why)


def _missing_parents(workspace: Path, rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    missing = []
    for k in range(1, len(parts) + 1):
        if not (workspace.joinpath(*parts[:k])).exists():
            missing.append("/".join(parts[:k]))
    return missing


def _make_parents(workspace: Path, rel: str) -> None:
    cur = workspace
    for part in rel.split("/")[:-1]:
        cur = cur / part
        try:
            os.mkdir(cur)
            atomicfile.fsync_dir(cur.parent)
        except FileExistsError:
            pass
    check_chain(workspace, rel)  # what exists now is still plain directories


def _remove_temp_leftovers(path: Path) -> None:
    prefix = atomicfile.tmp_prefix(path.name)
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                os.unlink(path.parent / name)


def _remove_journal_dir(directory: Path) -> None:
    """Remove in an order a crash cannot misread: manifest first, `kept` last."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    order = sorted(names, key=lambda n: (n != MANIFEST, n == KEPT))
    for name in order:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)
        if name == MANIFEST:
            atomicfile.fsync_dir(directory)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(directory)
    atomicfile.fsync_dir(directory.parent)


def _workspace_of(change: FileChange) -> Path:
    parts = change.rel.split("/")
    root = change.path.parents[len(parts) - 1]
    if root.joinpath(*parts) != change.path:
        raise ValueError(f"{change.rel}: path and rel disagree")
    return root
