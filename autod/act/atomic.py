"""Writing one file atomically, and never over a save someone made meanwhile.

A check "unchanged since planned" followed by a rename still loses a save made in between. So a file
is replaced with `renameat2(RENAME_EXCHANGE)`: the new bytes go in and what was there comes out under
the temp name in one step; if what came out is not what the caller expected, the two are swapped
back (the other writer's version wins) and `Displaced` is raised. A new file is placed with
`RENAME_NOREPLACE` (or `link()`, which never replaces). Where the kernel, libc or filesystem has no
renameat2, the file is re-checked right before a plain rename (the window shrinks to microseconds).
Temp files are the one atomic write's (autod.atomicfile): beside their target, named
`.<name>.autod-tmp-<hex>`, so a crash leaves nothing a recovery cannot find.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from autod.atomicfile import OnWrite, fsync_dir, write_temp
from autod.native import libc

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


class Displaced(Exception):
    """What the target held was not what autod expected: someone changed it (their version is kept)."""


def swap_in(path: Path, data: bytes, mode: int, *, expected: str | None, on_write: OnWrite | None) -> None:
    """Put `data` at `path` only if the file there hashes to `expected` (None: no file), atomically.

    Raises Displaced, with the path as someone else left it, when it does not.
    """
    tmp = write_temp(path, data, mode)
    try:
        if on_write is not None:
            on_write(path, data)  # before the rename: the watcher never sees an unrecorded write
        if expected is None:
            if not place_new(tmp, path):
                raise Displaced()
        elif _renameat2(tmp, path, _RENAME_EXCHANGE):
            displaced = read_current(tmp)  # what the path held at the instant of the swap
            if sha(displaced) != expected:
                if sha(read_current(path)) == sha(data):
                    _renameat2(tmp, path, _RENAME_EXCHANGE)  # their save goes back in
                raise Displaced()
            os.unlink(tmp)
        else:
            # No renameat2 here: re-check as late as possible, then a plain atomic rename.
            if sha(read_current(path)) != expected:
                raise Displaced()
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(path.parent)


def place_new(src: Path, dst: Path) -> bool:
    """Rename src to dst only if dst does not exist; False if it does."""
    try:
        if _renameat2(src, dst, _RENAME_NOREPLACE):
            return True
    except FileExistsError:
        return False
    try:
        os.link(src, dst)  # link() never replaces: the portable no-clobber rename
    except FileExistsError:
        return False
    os.unlink(src)
    return True


@functools.cache
def _renameat2_fn() -> Any | None:
    lib = libc()
    fn = getattr(lib, "renameat2", None) if lib is not None else None
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
    return fn


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """renameat2(2); False when this kernel, libc or filesystem does not support the flag."""
    fn = _renameat2_fn()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def read_current(path: Path) -> bytes | None:
    """The file's bytes now, None if it does not exist; never follows a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC)  # a FIFO: no wait
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        return f.read()


def sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()
