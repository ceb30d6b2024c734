"""`type: logtail`: follow a log file like `tail -F` and report build failures found in it.

Polling, not inotify: one stat and one read per poll survive every rotation scheme, network
filesystems and deleted directories, and cost nothing at a 0.25 s interval.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import structlog

from autod.atomicfile import atomic_write
from autod.config.settings import LogtailSource as LogtailConfig
from autod.events import Event, EventKind
from autod.logs import redact_text
from autod.sources.parsers import Failure, may_continue, scan_bytes, strip_ansi

log = structlog.get_logger(__name__)

READ_BYTES = 1 << 20  # default size of one read
MAX_LINE = 1 << 20  # the longest line kept whole
KEEP_OF_LONG_LINE = 64 << 10
MAX_CHUNK = 8 << 20  # bytes read and scanned at once: few syscalls and thread hops, bounded memory
HISTORY_LINES = 200  # lines kept from earlier chunks so a block split across chunks is whole
HISTORY_CHARS = 256 << 10
TRUNCATED_MARK = b" [autod: line truncated]"


@dataclass
class Position:
    dev: int
    inode: int
    offset: int


def _has_long_line(data: bytes) -> bool:
    """Any line over MAX_LINE? One rfind per MAX_LINE bytes, no copy."""
    pos = 0
    while len(data) - pos > MAX_LINE:
        nl = data.rfind(b"\n", pos, pos + MAX_LINE + 1)
        if nl < 0:
            return True
        pos = nl + 1
    return False


def _cap_long_lines(data: bytes) -> bytes:
    """Cut any line over MAX_LINE to its first KEEP_OF_LONG_LINE bytes (few calls for normal data)."""
    if not _has_long_line(data):  # the usual case: hand the block on without copying it
        return data
    out: list[bytes] = []
    pos = 0
    n = len(data)
    while pos < n:
        window_end = min(n, pos + MAX_LINE + 1)
        last_nl = data.rfind(b"\n", pos, window_end)
        if window_end == n and (last_nl < 0 or n - pos <= MAX_LINE):
            out.append(data[pos:])
            break
        if last_nl >= 0:  # every line in [pos, last_nl] is short
            out.append(data[pos : last_nl + 1])
            pos = last_nl + 1
            continue
        nl = data.find(b"\n", pos)
        out.append(data[pos : pos + KEEP_OF_LONG_LINE] + TRUNCATED_MARK + b"\n")
        pos = n if nl < 0 else nl + 1
    return b"".join(out)


class FileFollower:
    """The synchronous half: open, read, detect truncation and rotation. Runs in a thread."""

    def __init__(self, path: Path, *, from_start: bool, saved: Position | None) -> None:
        self.path = path
        self._from_start = from_start
        self._saved = saved
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
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
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
            if not self._check_replaced() or self._fh is None:
                return b""
            data = self._fh.read(size)
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
        if len(self._pending) > MAX_LINE:
            self._offset += len(self._pending)
            self._pending = self._pending[:KEEP_OF_LONG_LINE]
            self._skipping = True
        self._offset += len(complete)
        return _cap_long_lines(complete)

    def _check_replaced(self) -> bool:
        """At the end of the open file: has the path been truncated, rotated or re-created? True: reopened."""
        assert self._fh is not None
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return False  # deleted: keep the old handle until a new file appears
        if (st.st_dev, st.st_ino) != self._id:
            log.info("logtail.reopened", path=str(self.path), reason="rotated or re-created")
            self.close()  # the old file was read to its end (this read returned nothing)
            self._first_poll = False
            self._open_new()
            return True
        if st.st_size < self._fh.tell():
            log.info("logtail.reopened", path=str(self.path), reason="truncated")
            self._fh.seek(0)
            self._offset, self._pending, self._skipping = 0, b"", False
            return True
        return False

    def _open_new(self) -> None:
        self._saved = None
        self._open()


class _Scanner:
    """Scans each chunk together with the tail of the earlier ones, and reports each failure once.

    Offsets are bytes of the (colour-stripped) stream, not line numbers: counting the newlines of
    every chunk would cost as much as the whole keyword search.
    """

    def __init__(self, patterns: list[str], context_lines: int) -> None:
        self._patterns = patterns
        self._context = context_lines
        self._keep = HISTORY_LINES + context_lines
        self._tail = b""  # the last lines already scanned, so a block split across chunks is whole
        self._base = 0  # stream offset of the tail's first byte
        self._recent: dict[str, int] = {}  # fingerprint -> stream offset of its last report

    def feed(self, data: bytes) -> list[Failure]:
        data = strip_ansi(data)
        buf = self._tail + data if self._tail else data
        since = len(self._tail)
        found = scan_bytes(buf, since=since, extra_patterns=self._patterns, context_lines=self._context)
        out = []
        for failure, off in found:
            if off < since:
                continue  # completed, and so reported, in an earlier chunk
            if failure.fingerprint in self._recent:
                continue  # the same failure printed again right away
            self._recent[failure.fingerprint] = self._base + off
            out.append(failure)
        cut = _tail_start(buf, self._keep, HISTORY_CHARS)
        self._tail = buf[cut:]
        self._base += cut
        self._recent = {fp: at for fp, at in self._recent.items() if at >= self._base}
        return out


def _tail_start(buf: bytes, lines: int, max_bytes: int) -> int:
    """Where the last `lines` lines of `buf` (which ends with a newline) start, within max_bytes."""
    start = len(buf)
    for _ in range(lines):
        if start == 0:
            break
        start = buf.rfind(b"\n", 0, start - 1) + 1
    if len(buf) - start > max_bytes:  # long lines: keep what fits, from a line start
        start = buf.find(b"\n", len(buf) - max_bytes - 1) + 1
    return start


def state_file(state_dir: Path, path: Path) -> Path:
    """Where the read position of `path` is remembered across restarts."""
    return state_dir / "logtail" / f"{hashlib.sha1(str(path).encode()).hexdigest()}.json"


def _load_position(file: Path) -> Position | None:
    try:
        data = json.loads(file.read_text())
        return Position(int(data.get("dev", 0)), int(data["inode"]), int(data["offset"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_position(file: Path, pos: Position, path: Path) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"path": str(path), "dev": pos.dev, "inode": pos.inode, "offset": pos.offset})
    atomic_write(file, data.encode(), 0o600)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class LogtailSource:
    """Yields a build_failed event for each failure that appears in the followed file."""

    def __init__(self, cfg: LogtailConfig, workspace: Path, state_dir: Path) -> None:
        path = Path(cfg.path).expanduser()
        self.path = path if path.is_absolute() else workspace / path
        self.cfg = cfg
        self.name = f"logtail:{cfg.name or self.path.name}"
        self._state = state_file(state_dir, self.path)
        self._settle_s = min(0.2, cfg.poll_s)
        self.armed = asyncio.Event()  # set after the first look at the file: later lines are reported

    async def events(self) -> AsyncIterator[Event]:
        saved = await asyncio.to_thread(_load_position, self._state)
        follower = FileFollower(self.path, from_start=self.cfg.from_start, saved=saved)
        scanner = _Scanner(self.cfg.patterns, self.cfg.context_lines)
        try:
            while True:
                chunk = await self._next_chunk(follower)
                for failure in await asyncio.to_thread(scanner.feed, chunk):
                    yield self._event(failure)
                pos = follower.position
                if pos is not None:
                    await asyncio.to_thread(_save_position, self._state, pos, self.path)
        finally:
            follower.close()

    async def _next_chunk(self, follower: FileFollower) -> bytes:
        """Wait for new lines, then take all there are, up to MAX_CHUNK, in one read."""
        while True:
            # Idle: a stat on the loop is microseconds; a read in a thread only once the file
            # looks different (grown, truncated, replaced, deleted or created) from before the read.
            seen = _signature(self.path)
            data = await asyncio.to_thread(follower.read, MAX_CHUNK)
            # the first read opened the file at its end (or found none: it is then read from its start)
            self.armed.set()
            if data:
                break
            if not follower.drained:
                continue  # bytes were read but no line completed yet (a long line being skipped)
            while _signature(self.path) == seen:
                await asyncio.sleep(self.cfg.poll_s)
        if len(data) < MAX_CHUNK and may_continue(data):
            # a failure near the end may still be being written (a traceback often comes in two
            # writes): wait once for the rest, so its excerpt is whole. Noise at the end needs no wait.
            await asyncio.sleep(self._settle_s)
            more = await asyncio.to_thread(follower.read, MAX_CHUNK - len(data))
            data += more
        return data

    def _event(self, failure: Failure) -> Event:
        return Event(
            source=self.name,
            kind=EventKind.BUILD_FAILED,
            # known secrets never reach an Event payload (and so a prompt or memory)
            summary=redact_text(failure.summary),
            payload={
                "excerpt": redact_text(failure.excerpt),
                "locations": failure.locations,
                "detector": failure.detector,
                "log_path": str(self.path),
            },
            fingerprint=failure.fingerprint,
        )

