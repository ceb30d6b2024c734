"""The one way autod reads a file that a check, a test or the workspace could have planted or swapped.

A check runs code autod does not trust, and some of what it leaves behind autod reads afterwards: the
per-test results and the line recorder's output (in a directory bound writable into the sandbox),
ignore files, transcripts. Any of them may have been replaced by a named pipe (an `open()` for
reading blocks until a writer comes, for ever), a symlink to a secret or to `/dev/zero`, or a file of
gigabytes. `read_untrusted` cannot block and cannot be led elsewhere:

- `O_NOFOLLOW`: a symlink in the last component is refused, never followed;
- `O_NONBLOCK`: opening a FIFO returns at once (and is then refused), never waits for a writer;
- `fstat` on the opened descriptor: only a regular file is read (no FIFO, socket or device), and the
  check is on what was opened, not on a name that could be swapped in between;
- a size cap: a larger file is refused before it is read, and the read itself stops at the cap, so a
  file that grows while it is read still costs at most `cap` bytes.

It raises `UnsafeRead` (an `OSError`) saying which rule refused the file; a caller treats that as
"no result", never as a pass.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from autod.config.bounded import read_upto

__all__ = ["UnsafeRead", "exists_regular", "read_untrusted", "read_untrusted_head", "read_untrusted_text"]

_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
          | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))


class UnsafeRead(OSError):
    """The file was not read: it is not a regular file, is a symlink, or is over the cap."""


def read_untrusted(path: str | os.PathLike[str], *, cap: int) -> bytes:
    """The bytes of the regular file at `path` (at most `cap`), read without following a final
    symlink and without blocking. Raises UnsafeRead (or OSError when it does not exist)."""
    fd = _open_regular(path)
    try:
        st = os.fstat(fd)
        if st.st_size > cap:
            raise UnsafeRead(errno.EFBIG, f"{st.st_size} bytes, over the {cap}-byte cap", str(path))
        data = read_upto(fd, cap)
        if len(data) > cap:
            raise UnsafeRead(errno.EFBIG, f"grew past the {cap}-byte cap while read", str(path))
        return data
    finally:
        os.close(fd)


def read_untrusted_head(path: str | os.PathLike[str], size: int) -> bytes:
    """The first `size` bytes of the regular file at `path`, by the same rules (no symlink, no FIFO wait);
    a longer file is not refused, only its head read."""
    fd = _open_regular(path)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def _open_regular(path: str | os.PathLike[str]) -> int:
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeRead(errno.ELOOP, "a symlink, not followed", str(path)) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeRead(errno.EINVAL, f"not a regular file ({_kind(st.st_mode)})", str(path))
    return fd


def read_untrusted_text(path: str | os.PathLike[str], *, cap: int) -> str:
    """`read_untrusted` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_untrusted(path, cap=cap).decode("utf-8", "replace")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a directory"))
    for test, name in kinds:
        if test(mode):
            return name
    return "not a plain file"


def exists_regular(path: Path) -> bool:
    """Whether `path` is a regular file (not followed if a symlink); never blocks."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
