"""Following a growing file like `tail -F`: the one follower behind `type: logtail` and `autod logs -f`.

Blocking and never waiting (run it in a thread): each `read` hands out the complete lines appended
since the last one. It holds the file open across reads, so it survives rotation by rename (the old
file is read to its end before the new one is opened), copytruncate (read again from the start) and
deletion (the old handle is kept until a new file appears). Only a regular file is followed: a named
pipe put at the path is refused without waiting for a writer. A path under a tree others may write
(`beneath`: the workspace, where a check runs) is opened one component at a time from that tree's root,
none of them followed if it is a link: a check that swaps the log, or a directory on its way, for a link
to a file outside leads the follower nowhere. A line longer than `max_line` is cut to
its first `keep_of_long_line` bytes and marked, so memory stays bounded whatever the file holds.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["KEEP_OF_LONG_LINE", "MAX_LINE", "READ_BYTES", "TRUNCATED_MARK", "FileFollower", "Position"]

READ_BYTES = 1 << 20  # default size of one read
MAX_LINE = 1 << 20  # the longest line kept whole
KEEP_OF_LONG_LINE = 64 << 10
TRUNCATED_MARK = b" [autod: line truncated]"


@dataclass
class Position:
    """Where a follower is: the file (device and inode) and the offset past its last complete line."""

    dev: int
    inode: int
    offset: int


def _has_long_line(data: bytes, max_line: int) -> bool:
    """Any line over max_line? One rfind per max_line bytes, no copy."""
    pos = 0
    while len(data) - pos > max_line:
        nl = data.rfind(b"\n", pos, pos + max_line + 1)
        if nl < 0:
            return True
        pos = nl + 1
    return False


def _cap_long_lines(data: bytes, max_line: int, keep: int) -> bytes:
    """Cut any line over max_line to its first `keep` bytes (few calls for normal data)."""
    if not _has_long_line(data, max_line):  # the usual case: hand the block on without copying it
        return data
    out: list[bytes] = []
    pos = 0
    n = len(data)
    while pos < n:
        window_end = min(n, pos + max_line + 1)
        last_nl = data.rfind(b"\n", pos, window_end)
        if window_end == n and (last_nl < 0 or n - pos <= max_line):
            out.append(data[pos:])
            break
        if last_nl >= 0:  # every line in [pos, last_nl] is short
            out.append(data[pos : last_nl + 1])
            pos = last_nl + 1
            continue
        nl = data.find(b"\n", pos)
        out.append(data[pos : pos + keep] + TRUNCATED_MARK + b"\n")
        pos = n if nl < 0 else nl + 1
    return b"".join(out)


class FileFollower:
    """Open, read, detect truncation and rotation.

    The first file found starts at `saved` when it is that file and still that long, else at its
    end (or its start with `from_start`); a file that appears later is read from its start.
    `on_reopen(reason)` is told of each rotation or truncation.
    """

    def __init__(
        self,
        path: Path,
        *,
        from_start: bool,
        saved: Position | None,
        max_line: int = MAX_LINE,
        keep_of_long_line: int = KEEP_OF_LONG_LINE,
        on_reopen: Callable[[str], None] | None = None,
        beneath: Path | None = None,
    ) -> None:
        self.path = path
        self._beneath = beneath
        self._from_start = from_start
        self._saved = saved
        self._max_line = max_line
        self._keep = keep_of_long_line
        self._on_reopen = on_reopen
        self._fh: BinaryIO | None = None
        self._id: tuple[int, int] | None = None
        self._offset = 0  # file offset just past the last complete line handed out
        self._pending = b""  # a line not yet ended by a newline
        self._skipping = False  # inside a too-long line: drop bytes until its newline
        self._first_poll = True
        self.drained = False  # the last read reached the end of the open file

    @property
    def position(self) -> Position | None:
        if self._id is None:
            return None
        return Position(self._id[0], self._id[1], self._offset)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _open(self) -> bool:
        first = self._first_poll
        self._first_poll = False
        try:  # O_NONBLOCK: a named pipe put at the path opens at once (refused below), never waits
            fd = _open_log(self.path, self._beneath)
        except OSError:  # missing, not permitted, or a link where none may be (ELOOP)
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a FIFO, socket or device is no log to tail
            os.close(fd)
            return False
        fh = os.fdopen(fd, "rb")  # held open across polls on purpose
        self._id = (st.st_dev, st.st_ino)
        start = 0
        saved = self._saved
        self._saved = None
        if saved is not None and (saved.dev, saved.inode) == self._id and saved.offset <= st.st_size:
            start = saved.offset
        elif first and not self._from_start:
            start = st.st_size  # an old log is not replayed on every start
        fh.seek(start)
        self._fh, self._offset, self._pending, self._skipping = fh, start, b"", False
        return True

    def read(self, size: int = READ_BYTES) -> bytes:
        """Complete lines appended since the last call, from at most `size` bytes (b"" if nothing new)."""
        self.drained = True
        if self._fh is None and not self._open():
            return b""
        assert self._fh is not None
        data = self._fh.read(size)
        self.drained = not data
        if not data:
            # switched to a new file or rewound: read it now, not at the next change of the path
            data = self._check_replaced(size)
            self.drained = not data
            if not data:
                return b""
        return self._lines(data)

    def _lines(self, data: bytes) -> bytes:
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self._offset += len(data)
                return b""
            self._offset += nl + 1
            data = data[nl + 1 :]
            self._skipping = False
            head = self._pending + TRUNCATED_MARK + b"\n"
            self._pending = b""
            return head + self._lines(data) if data else head
        if self._pending:
            data = self._pending + data
        cut = data.rfind(b"\n") + 1
        complete, self._pending = (data, b"") if cut == len(data) else (data[:cut], data[cut:])
        if len(self._pending) > self._max_line:
            self._offset += len(self._pending)
            self._pending = self._pending[: self._keep]
            self._skipping = True
        self._offset += len(complete)
        return _cap_long_lines(complete, self._max_line, self._keep)

    def _check_replaced(self, size: int) -> bytes:
        """At the end of the open file: truncated, rotated or re-created? What there is to read next."""
        assert self._fh is not None
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return b""  # deleted: keep the old handle until a new file appears
        if (st.st_dev, st.st_ino) != self._id:
            # Renamed: finish the old file first (its writer may have appended to it before it
            # noticed the rename); the new one is opened once the old one reads empty.
            rest = self._fh.read(size)
            if rest:
                return rest
            self._reopened("rotated or re-created")
            self.close()
            self._saved = None
            self._open()
        elif st.st_size < self._fh.tell():
            self._reopened("truncated")
            self._fh.seek(0)
            self._offset, self._pending, self._skipping = 0, b"", False
        else:
            return b""
        return self._fh.read(size) if self._fh is not None else b""

    def _reopened(self, reason: str) -> None:
        if self._on_reopen is not None:
            self._on_reopen(reason)


_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_log(path: Path, beneath: Path | None) -> int:
    """A descriptor of the log at `path`; under `beneath`, every component below it opened from the one
    before, with no link followed. Raises OSError."""
    if beneath is None:
        return os.open(path, _FLAGS)
    rel = os.path.relpath(path, beneath)
    parts = rel.split(os.sep)
    if parts[0] in ("..", ".") or "" in parts:  # not strictly beneath it
        raise OSError(f"{path} is not beneath {beneath}")
    fd = os.open(beneath, _DIR & ~_NOFOLLOW)  # the root itself is the operator's, links and all
    try:
        for part in parts[:-1]:
            fd, parent = os.open(part, _DIR, dir_fd=fd), fd
            os.close(parent)
        return os.open(parts[-1], _FLAGS | _NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)
