"""`type: logtail`: follow a log file like `tail -F` and report build failures found in it.

Polling, not inotify: one stat and one read per poll survive every rotation scheme, network
filesystems and deleted directories, and cost nothing at a 0.25 s interval.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import structlog

from autod.atomicfile import atomic_write
from autod.config.settings import LogtailSource as LogtailConfig
from autod.events import Event, EventKind
from autod.logs import redact_text
from autod.sources.follower import FileFollower, Position
from autod.sources.parsers import Failure, may_continue, scan_bytes, strip_ansi

log = structlog.get_logger(__name__)

MAX_CHUNK = 8 << 20  # bytes read and scanned at once: few syscalls and thread hops, bounded memory
HISTORY_LINES = 200  # lines kept from earlier chunks so a block split across chunks is whole
HISTORY_CHARS = 256 << 10


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
        self._workspace = workspace  # a log in it is a check's to write: no link there is followed
        self.cfg = cfg
        self.name = f"logtail:{cfg.name or self.path.name}"
        self._state = state_file(state_dir, self.path)
        self._settle_s = min(0.2, cfg.poll_s)
        self.armed = asyncio.Event()  # set after the first look at the file: later lines are reported

    async def events(self) -> AsyncIterator[Event]:
        saved = await asyncio.to_thread(_load_position, self._state)
        follower = FileFollower(
            self.path, from_start=self.cfg.from_start, saved=saved, on_reopen=self._reopened,
            beneath=self._workspace if _under(self.path, self._workspace) else None,
        )
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

    def _reopened(self, reason: str) -> None:
        log.info("logtail.reopened", path=str(self.path), reason=reason)

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



def _under(path: Path, root: Path) -> bool:
    rel = os.path.relpath(os.path.normpath(path), os.path.normpath(root))
    return rel.split(os.sep)[0] not in (".", "..")
