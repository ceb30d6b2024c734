"""A copy of the workspace under the state dir, kept in step with it file by file.

Candidates are verified here, never in the operator's working tree: the mirror is mounted at the
workspace's own path inside the check's sandbox (`autod.checks.run.run_check(..., mount_at=...)`), so
absolute paths, editable installs and the project's venv all behave as in the real tree.

What it holds: every workspace file but `.git`, autod's state dir and own files, venvs, `node_modules`
and tool caches. `.git` and the venv-like directories are bound back read-only from the real tree by
the sandbox (`bind_back`), so they are neither copied nor writable; tool caches are the mirror's own.

A sync costs one directory walk of the workspace and one of the mirror, plus a copy of each file that
changed since the last sync (compared by size, mtime and inode of the source, and the ctime of the
copy: a check that rewrote a copy and forged its mtime still changed its ctime). The first sync of a
process copies everything: the bookkeeping is in memory only, so nothing on disk is ever trusted.
Blocking: call it from a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from autod.paths import NOT_SOURCE_DIRS
from autod.walk import remove_tree

# Directories the sandbox binds back read-only from the real tree instead of copying them.
BIND_BACK = frozenset({".git", ".venv", "venv", "node_modules", ".tox", ".nox"})
# Caches the mirror keeps as its own (never copied, never deleted by a sync).
OWN_CACHES = frozenset(NOT_SOURCE_DIRS - BIND_BACK)
MAX_BIND_BACK = 64  # nested venvs / node_modules bound back, at most (bwrap argv stays short)


class TooLarge(Exception):
    """The workspace is over the mirror's limits (files or bytes): isolation is not used for it."""


class Stopped(Exception):
    """A sync was asked to stop (the daemon is stopping)."""


@dataclass
class SyncStats:
    files: int = 0  # files in the mirror after the sync
    copied: int = 0
    removed: int = 0
    bytes_copied: int = 0
    bind_back: list[str] = field(default_factory=list)  # relative directories bound back read-only


@dataclass(frozen=True)
class _Entry:
    src: tuple[int, int, int, int]  # (size, mtime_ns, ino, mode) of the workspace file when copied
    dst_ctime: int  # ctime_ns of the copy right after it was made


class Mirror:
    """The mirror of one workspace. `sync()` brings it in step; `write()` puts a candidate's files in."""

    def __init__(
        self,
        workspace: Path,
        root: Path,
        *,
        skip: Iterable[Path] = (),
        max_files: int = 50_000,
        max_bytes: int = 1 << 30,
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.root = root
        self.max_files = max_files
        self.max_bytes = max_bytes
        # absolute real paths never copied: the state dir (the mirror lives there), autod's own files
        self.skip = {os.path.realpath(p) for p in skip} | {os.path.realpath(root)}
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self.bind_back: list[str] = []

    # -- sync ---------------------------------------------------------------------------
    def sync(self, stop: threading.Event | None = None) -> SyncStats:
        """Make the mirror hold what the workspace holds now. Raises TooLarge or Stopped."""
        with self._lock:
            if not self._entries and self.root.exists():
                remove_tree(self.root)  # a new process trusts nothing it did not copy itself
                if self.root.exists():
                    raise OSError(f"cannot empty the mirror {self.root}")
            self.root.mkdir(parents=True, exist_ok=True)
            stats = SyncStats()
            seen_dirs: set[str] = set()
            wanted = self._walk_source(stats, seen_dirs, stop)
            copies = self._prune(wanted, seen_dirs, stats, stop)  # rel -> ctime of each copy kept
            for rel, st in wanted.items():
                entry = self._entries.get(rel)
                if entry is not None and entry.src == st and copies.get(rel) == entry.dst_ctime:
                    continue
                _check(stop)
                self._copy(rel, st, stats)
            stats.files = len(wanted)
            stats.bind_back = list(self.bind_back)
            return stats

    def _walk_source(
        self, stats: SyncStats, dirs_out: set[str], stop: threading.Event | None
    ) -> dict[str, tuple[int, int, int, int]]:
        out: dict[str, tuple[int, int, int, int]] = {}
        bind_back: list[str] = []
        total = 0
        stack = [""]
        while stack:
            _check(stop)
            rel_dir = stack.pop()
            here = os.path.join(self.workspace, rel_dir) if rel_dir else str(self.workspace)
            try:
                entries = list(os.scandir(here))
            except OSError:
                continue
            for e in entries:
                rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
                try:
                    is_dir = e.is_dir(follow_symlinks=False)  # from the directory entry: no stat
                    st = None if is_dir else e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st is None:
                    # walked from the real workspace without following a link: e.path is canonical
                    if e.path in self.skip or e.name in OWN_CACHES:
                        continue
                    if e.name in BIND_BACK or os.path.exists(os.path.join(e.path, "pyvenv.cfg")):
                        bind_back.append(rel)
                        continue
                    dirs_out.add(rel)
                    stack.append(rel)
                elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    if e.path in self.skip and not stat.S_ISLNK(st.st_mode):
                        continue
                    out[rel] = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)
                    total += st.st_size if stat.S_ISREG(st.st_mode) else 0
                    if len(out) > self.max_files:
                        raise TooLarge(f"more than {self.max_files} files (isolation.max_files)")
                    if total > self.max_bytes:
                        raise TooLarge(f"more than {self.max_bytes >> 20} MB (isolation.max_mb)")
                # sockets, fifos and devices are not part of a source tree
        if len(bind_back) > MAX_BIND_BACK:
            raise TooLarge(f"more than {MAX_BIND_BACK} venv/node_modules directories to bind back")
        self.bind_back = sorted(bind_back)
        return out

    def _prune(
        self, wanted: dict[str, tuple[int, int, int, int]], dirs: set[str], stats: SyncStats,
        stop: threading.Event | None,
    ) -> dict[str, int]:
        """Remove from the mirror what the workspace no longer has (and what checks left there);
        return the ctime of every copy that stays (one stat each, in the same walk)."""
        kept: dict[str, int] = {}
        stack = [""]
        while stack:
            _check(stop)
            rel_dir = stack.pop()
            here = os.path.join(self.root, rel_dir) if rel_dir else str(self.root)
            try:
                entries = list(os.scandir(here))
            except OSError:
                continue
            for e in entries:
                rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name in OWN_CACHES:
                            continue
                        if rel in dirs:
                            stack.append(rel)
                            continue
                        # a directory the workspace lacks: an empty one is a mount point bwrap left
                        # (`.git`, a venv), harmless; one with content a check made goes
                        if _not_empty(e.path):
                            _remove_tree(e.path)
                            self._forget(rel + "/")
                            stats.removed += 1
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if rel not in wanted:
                    _unlink(e.path)
                    self._entries.pop(rel, None)
                    stats.removed += 1
                else:
                    kept[rel] = st.st_ctime_ns
        return kept

    def _forget(self, prefix: str) -> None:
        for k in [k for k in self._entries if k.startswith(prefix)]:
            del self._entries[k]

    def _copy(self, rel: str, st: tuple[int, int, int, int], stats: SyncStats) -> None:
        src = self.workspace / rel
        dst = self.root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.is_dir() and not dst.is_symlink():
            _remove_tree(str(dst))
        # a name of its own length whatever the file's (a name of 242 bytes or more would pass NAME_MAX)
        tmp = dst.with_name(f".autod-mirror-{hashlib.sha256(os.fsencode(dst.name)).hexdigest()[:20]}")
        try:
            if stat.S_ISLNK(st[3]):
                _unlink(str(tmp))
                os.symlink(os.readlink(src), tmp)
            else:
                shutil.copyfile(src, tmp, follow_symlinks=False)
                os.chmod(tmp, stat.S_IMODE(st[3]))
                os.utime(tmp, ns=(st[1], st[1]))
            os.replace(tmp, dst)
        except OSError:
            with contextlib.suppress(OSError):
                _unlink(str(tmp))  # it vanished or cannot be read: the next sync tries again
            self._entries.pop(rel, None)
            return
        try:
            self._entries[rel] = _Entry(st, os.lstat(dst).st_ctime_ns)
        except OSError:
            self._entries.pop(rel, None)
        stats.copied += 1
        stats.bytes_copied += st[0] if stat.S_ISREG(st[3]) else 0

    # -- candidates ---------------------------------------------------------------------
    def write(self, files: dict[str, bytes], modes: dict[str, int | None] | None = None) -> None:
        """Put a candidate's files (relative path -> new bytes) into the mirror; the next sync undoes it."""
        with self._lock:
            for rel, data in files.items():
                dst = self.root / rel
                if not _inside(self.root, dst):
                    raise ValueError(f"{rel}: outside the mirror")
                dst.parent.mkdir(parents=True, exist_ok=True)
                if dst.is_dir() and not dst.is_symlink():
                    _remove_tree(str(dst))
                elif dst.is_symlink():
                    _unlink(str(dst))
                dst.write_bytes(data)
                mode = (modes or {}).get(rel)
                if mode is not None:
                    os.chmod(dst, mode)
                self._entries.pop(rel, None)  # differs from the workspace: recopied at the next sync

    def reset(self) -> None:
        """Forget everything: the next sync starts from an empty mirror."""
        with self._lock:
            self._entries.clear()
            if self.root.exists():
                remove_tree(self.root)


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped()


def _inside(root: Path, path: Path) -> bool:
    real_root, parent = os.path.realpath(root), os.path.realpath(path.parent)
    return parent == real_root or parent.startswith(real_root + os.sep)


def _not_empty(path: str) -> bool:
    with os.scandir(path) as it:
        return any(True for _ in it)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        _remove_tree(path)


def _remove_tree(path: str) -> None:
    remove_tree(path)
