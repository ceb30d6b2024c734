"""The reader behind `autod logs`: filter, tail and follow the JSON-lines log.

Lines that are not JSON objects (a torn write, an editor's scratch, a binary blob) are
skipped, never fatal. `--json` prints matching lines as they are in the file (re-encoded with
`\\uXXXX` escapes when one holds a character a terminal would act on); the human format puts one
record on one line, the cycle's reflection record included. Both are terminal-safe (autod.safety.termsafe).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from autod.cli.logformat import _level_rank, _parse_time, format_record
from autod.safety import termsafe
from autod.sources.follower import FileFollower, Position

__all__ = ["LogFilter", "follow", "format_record", "parse_since", "read_records", "run_logs"]

_BLOCK = 64 * 1024
_MAX_READ = 4 * 1024 * 1024  # per poll, so one huge burst cannot starve the event loop's other work
_MAX_PARTIAL = 16 * 1024 * 1024  # a record this long is garbage: cut, so it does not parse and is skipped


@dataclass
class LogFilter:
    """Which records to show; every set field must match."""

    cycle: str | None = None  # a cycle id or its prefix (the human format shows 8 characters)
    phase: str | None = None
    level: str | None = None  # the minimum level
    mode: str | None = None
    since: datetime | None = None

    def __post_init__(self) -> None:
        if self.level is not None and _level_rank(self.level) == 0:
            raise ValueError(f"level must be debug, info, warning, error or critical, not {self.level!r}")
        if self.since is not None and self.since.tzinfo is None:
            self.since = self.since.replace(tzinfo=UTC)

    def match(self, record: dict) -> bool:
        """True when the record passes every filter that is set."""
        if self.cycle is not None and not str(record.get("cycle_id", "")).startswith(self.cycle):
            return False
        if self.phase is not None and record.get("phase") != self.phase:
            return False
        if self.mode is not None and record.get("mode") != self.mode:
            return False
        if self.level is not None and _level_rank(record.get("level")) < _level_rank(self.level):
            return False
        if self.since is not None:
            stamp = _parse_time(record.get("timestamp"))
            if stamp is None or stamp < self.since:
                return False
        return True


_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """ "30s", "10m", "2h", "1d", "1w" ago, or an ISO date/time (UTC when no offset is given)."""
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2).lower()
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    parsed = _parse_time(text.strip())
    if parsed is None:
        raise ValueError(f"--since takes 30s, 10m, 2h, 1d or an ISO date/time, not {text!r}")
    return parsed


# ---------------------------------------------------------------------------------------
# Reading


def _parse_line(raw: bytes) -> tuple[str, dict] | None:
    """(the line as text, the record) or None for anything that is not one JSON object."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
        record = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return (text, record) if isinstance(record, dict) else None


def _lines_backwards(fh: BinaryIO, end: int) -> Iterator[bytes]:
    """The lines of fh[:end], last first, reading fixed-size blocks from the end."""
    pos, rest = end, b""
    while pos > 0:
        size = min(_BLOCK, pos)
        pos -= size
        fh.seek(pos)
        parts = (fh.read(size) + rest).split(b"\n")
        rest = parts[0]
        yield from reversed(parts[1:])
    yield rest


def _complete_end(fh: BinaryIO, size: int) -> int:
    """Offset just past the last newline: a torn last line is left for the follower."""
    pos = size
    while pos > 0:
        start = max(0, pos - _BLOCK)
        fh.seek(start)
        idx = fh.read(pos - start).rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


def _tail(path: Path, flt: LogFilter, n: int | None, end: int | None = None) -> list[tuple[str, dict]]:
    """The last n matching (line, record) pairs of one file, oldest first; n=None: all."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below; the generators need it open)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return []
    with fh:
        if end is None:
            end = os.fstat(fh.fileno()).st_size
        if n is None:
            fh.seek(0)
            pairs = (_parse_line(raw.rstrip(b"\n")) for raw in _bounded(fh, end))
            return [p for p in pairs if p is not None and flt.match(p[1])]
        found: list[tuple[str, dict]] = []
        if n <= 0:
            return found
        for raw in _lines_backwards(fh, end):
            pair = _parse_line(raw)
            if pair is not None and flt.match(pair[1]):
                found.append(pair)
                if len(found) >= n:
                    break
        found.reverse()
        return found


def _bounded(fh: BinaryIO, end: int) -> Iterator[bytes]:
    """Lines of fh from the current position up to the offset end."""
    left = end - fh.tell()
    for raw in fh:
        if left <= 0:
            return
        yield raw[:left]
        left -= len(raw)


def _rotated(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def _history(path: Path, flt: LogFilter, n: int | None, end: int | None = None) -> list[tuple[str, dict]]:
    current = _tail(path, flt, n, end)
    if n is None or len(current) < n:
        # The previous file (logrotate's path.1) fills in what the current one lacks.
        older = _tail(_rotated(path), flt, None if n is None else n - len(current))
        current = older + current
    return current


def read_records(path: Path, flt: LogFilter, n: int | None) -> list[dict]:
    """The last n matching records (all with n=None), oldest first; path.1 fills in if needed."""
    return [record for _, record in _history(path, flt, n)]


# ---------------------------------------------------------------------------------------
# Following


def _follower(path: Path, start: int | None, file_id: tuple[int, int] | None) -> FileFollower:
    """The follower from `start` in the file `file_id` (by default the file there now); None: its end.
    A file other than that one, or shorter than `start`, is read from its start."""
    if start is not None and file_id is None:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            file_id = (st.st_dev, st.st_ino)
    saved = Position(*file_id, start) if start is not None and file_id is not None else None
    return FileFollower(path, from_start=start is not None, saved=saved, max_line=_MAX_PARTIAL)


async def _follow_pairs(
    path: Path,
    flt: LogFilter,
    *,
    poll_s: float,
    stop: asyncio.Event | None,
    start: int | None,
    file_id: tuple[int, int] | None = None,
) -> AsyncIterator[tuple[str, dict]]:
    follower = await asyncio.to_thread(_follower, path, start, file_id)  # it may stat the file
    stop = stop or asyncio.Event()
    try:
        while not stop.is_set():
            lines = (await asyncio.to_thread(follower.read, _MAX_READ)).split(b"\n")[:-1]
            for raw in lines:
                pair = _parse_line(raw)
                if pair is not None and flt.match(pair[1]):
                    yield pair
            if not lines:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), poll_s)
    finally:
        follower.close()


async def follow(
    path: Path,
    flt: LogFilter,
    *,
    poll_s: float = 0.25,
    stop: asyncio.Event | None = None,
    start: int | None = None,
) -> AsyncIterator[dict]:
    """New matching records as they are written, across rename and copytruncate rotation.

    start: byte offset in the current file to begin at (None: its end, like `tail -F -n 0`).
    """
    async for _, record in _follow_pairs(path, flt, poll_s=poll_s, stop=stop, start=start):
        yield record


# ---------------------------------------------------------------------------------------
# The command


def _file_state(path: Path) -> tuple[int, tuple[int, int]] | None:
    """(offset past the last complete line, file id) of the current log file."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            return _complete_end(fh, st.st_size), (st.st_dev, st.st_ino)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None


def _json_line(text: str, record: dict) -> str:
    """The line as in the file, unless it carries a character a terminal would act on: then re-encoded."""
    if not termsafe.UNSAFE.search(text):
        return text
    return termsafe.json_text(json.dumps(record, ensure_ascii=False, default=str))


def run_logs(
    path: Path, *, follow: bool, as_json: bool, flt: LogFilter, n: int, out: TextIO, color: bool | None = None
) -> int:
    """`autod logs`: print the last n matching records, then (with follow) new ones as they come."""
    if color is None:
        color = out.isatty() and "NO_COLOR" not in os.environ

    def emit(text: str, record: dict) -> None:
        out.write((_json_line(text, record) if as_json else format_record(record, color=color)) + "\n")

    state = _file_state(path)
    if state is None and not follow and not _rotated(path).exists():
        print(f"autod logs: no log file at {path} (see logging.file in the config)", file=sys.stderr)
        return 1
    end, file_id = state if state is not None else (0, None)
    try:
        for text, record in _history(path, flt, n, end if state is not None else None):
            emit(text, record)
        out.flush()
        if follow:
            asyncio.run(_follow_to(path, flt, emit, out, start=end, file_id=file_id))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`autod logs | head`): not an error. Point stdout at
        # /dev/null so the interpreter's final flush does not complain.
        if out is sys.stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0


async def _follow_to(path: Path, flt: LogFilter, emit: Any, out: TextIO, *, start: int,
                     file_id: tuple[int, int] | None) -> None:
    async for text, record in _follow_pairs(path, flt, poll_s=0.25, stop=None, start=start, file_id=file_id):
        emit(text, record)
        out.flush()  # a pipe (`| grep`) sees each record as it comes
