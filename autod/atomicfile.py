"""The one atomic write: a file is whole or absent, never half written, never written through a symlink.

The bytes go to a temp file beside the target (`.<name>.autod-tmp-<hex>`: the watcher ignores it and a
recovery can find it), created exclusively and without following a symlink, 0600 while it is written,
then given the target's owner (when root) and `mode`, fsynced, renamed over the target, and the
directory fsynced so the rename survives a power cut. autod.act.atomic builds its no-clobber
replace of a workspace file on the same temp file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from autod.safety.boundary import TMP_MARKER

__all__ = ["OnWrite", "atomic_write", "fsync_dir", "tmp_prefix", "write_new_file", "write_temp"]

OnWrite = Callable[[Path, bytes | None], None]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def atomic_write(path: Path, data: bytes, mode: int, *, on_write: OnWrite | None = None) -> None:
    """Replace (or create) `path` with `data` and `mode`, atomically and durably.

    `on_write(path, data)` runs before the rename, so a watcher never sees a write it was not told of.
    """
    tmp = write_temp(path, data, mode)
    try:
        if on_write is not None:
            on_write(path, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def write_temp(path: Path, data: bytes, mode: int) -> Path:
    """A temp file beside path holding data, fsynced, with path's owner (when root) and `mode`."""
    tmp = path.parent / f"{tmp_prefix(path.name)}{secrets.token_hex(6)}"
    owner = _owner_of(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC, 0o600)
    try:
        _write_all(fd, data)
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # only root may give a file away
                os.fchown(fd, *owner)
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Create `path` (never an existing file, never through a symlink) holding `data`, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC, mode)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _owner_of(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st.st_uid, st.st_gid


def tmp_prefix(name: str) -> str:
    """The start of a temp file's name beside `name`."""
    return f".{name[:200]}{TMP_MARKER}"  # stays under NAME_MAX with the random suffix


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new name in `directory` durable (where the filesystem allows)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a directory; the rename is still atomic
        pass
    finally:
        os.close(fd)
