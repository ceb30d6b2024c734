"""What the model was sent and what it answered, per cycle: so "search text not found" nine times in a
row can be diagnosed instead of guessed.

A cycle's transcript is `<state_dir>/transcripts/<cycle_id>.jsonl`: one JSON object a line, in order:
`prompt` (a message list, stored once per distinct list and referred to by id), `exchange` (one HTTP
request: its parameters, status, the raw reply, how long it took), `plan` (a parsed plan), `candidate`
(what autod did with it: refused with the offending text and the reason, verified with the outcome).
Everything is redacted with the log's rules (configured secrets and credential-looking values)
before it is written; files are 0600 in the private state dir. Entries are buffered while the cycle
runs and written off the event loop when it ends (`flush`); a cycle's transcript is capped in size,
and `prune` keeps `transcripts.keep_days` days and `transcripts.max_mb` MB in all.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog

from autod import logs
from autod.linebreaks import lines_of
from autod.safety.saferead import read_untrusted_text

__all__ = ["Transcript", "TranscriptStore"]

log = structlog.get_logger("autod.transcripts")

_CYCLE_ID = re.compile(r"^[0-9a-f]{6,32}$")
MAX_CYCLE_BYTES = 8 * 2**20  # one cycle's transcript, at most (a note marks where it was cut)
MAX_TRANSCRIPT_BYTES = MAX_CYCLE_BYTES + 2**20  # what is read back: the cut note and the last entry over


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return logs.redact_text(value)
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(v) for v in value]
    return value


class TranscriptStore:
    """The transcripts directory of one state dir."""

    PRUNE_EVERY_S = 3600.0

    def __init__(self, state_dir: Path, *, keep_days: float = 14, max_mb: int = 256) -> None:
        self.dir = state_dir / "transcripts"
        self.keep_s = keep_days * 86400
        self.max_bytes = max_mb * 2**20
        self._pruned_at = float("-inf")

    def maybe_prune(self) -> None:
        """Prune at most once an hour (blocking; called after a transcript is written)."""
        now = time.monotonic()
        if now - self._pruned_at >= self.PRUNE_EVERY_S:
            self._pruned_at = now
            self.prune()

    def path(self, cycle_id: str) -> Path:
        if not _CYCLE_ID.match(cycle_id):
            raise ValueError(f"not a cycle id: {cycle_id[:40]!r}")
        return self.dir / f"{cycle_id}.jsonl"

    def open(self, cycle_id: str) -> Transcript:
        return Transcript(self, cycle_id)

    def read(self, cycle_id: str) -> list[dict[str, Any]]:
        """A cycle's entries, prompts resolved into the exchanges that sent them. [] when none."""
        try:
            text = read_untrusted_text(self.path(cycle_id), cap=MAX_TRANSCRIPT_BYTES)
        except (OSError, ValueError):
            return []
        prompts: dict[str, Any] = {}
        out: list[dict[str, Any]] = []
        for line in lines_of(text):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if entry.get("kind") == "prompt":
                prompts[str(entry.get("id"))] = entry.get("messages")
                continue
            if entry.get("kind") == "exchange" and "prompt" in entry:
                entry["messages"] = prompts.get(str(entry["prompt"]), [])
            out.append(entry)
        return out

    def find(self, prefix: str) -> list[str]:
        """Cycle ids with a transcript that start with `prefix`."""
        try:
            names = os.listdir(self.dir)
        except OSError:
            return []
        return sorted(n[:-6] for n in names if n.endswith(".jsonl") and n.startswith(prefix))

    def prune(self, now: float | None = None) -> int:
        """Drop transcripts past the age or beyond the size cap, oldest first (blocking). Returns how many."""
        now = time.time() if now is None else now
        try:
            entries = [(e.stat().st_mtime, e.stat().st_size, e.path) for e in os.scandir(self.dir)
                       if e.name.endswith(".jsonl")]
        except OSError:
            return 0
        entries.sort()
        total = sum(size for _, size, _ in entries)
        removed = 0
        for mtime, size, path in entries:
            if now - mtime <= self.keep_s and total <= self.max_bytes:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
            removed += 1
        if removed:
            log.info("transcripts.pruned", removed=removed)
        return removed


class Transcript:
    """One cycle's transcript: `add()` from anywhere in the cycle (cheap, in memory), `flush()` at the end."""

    def __init__(self, store: TranscriptStore, cycle_id: str) -> None:
        self.store = store
        self.cycle_id = cycle_id
        self._pending: list[str] = []
        self._prompts: set[str] = set()
        self._bytes = 0
        self._cut = False
        self._lock = threading.Lock()  # an exchange is added from a worker thread (its redaction is long)

    def add(self, entry: dict[str, Any]) -> None:
        """Record one entry (redacted now; an exchange's messages are stored once and referred to); from
        the event loop or a worker thread."""
        with self._lock:
            self._add(entry)

    def _add(self, entry: dict[str, Any]) -> None:
        entry = dict(entry)
        entry.setdefault("t", round(time.time(), 3))
        messages = entry.pop("messages", None)
        if isinstance(messages, list):
            raw = json.dumps(messages, sort_keys=True, ensure_ascii=False)
            pid = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            if pid not in self._prompts:
                self._prompts.add(pid)
                self._write({"kind": "prompt", "id": pid, "messages": _redact(messages)})
            entry["prompt"] = pid
        self._write(_redact(entry))

    def _write(self, entry: dict[str, Any]) -> None:
        if self._cut:
            return
        line = json.dumps(entry, ensure_ascii=False, default=str)
        if self._bytes + len(line) > MAX_CYCLE_BYTES:
            self._cut = True
            line = json.dumps({"kind": "note", "text": "transcript cut: over its size cap"})
        self._bytes += len(line) + 1
        self._pending.append(line)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pending)

    async def flush(self) -> None:
        """Append what was recorded to the cycle's file (in a worker thread)."""
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        await asyncio.to_thread(self._append, lines)

    def _append(self, lines: list[str]) -> None:
        path = self.store.path(self.cycle_id)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        self.store.maybe_prune()
