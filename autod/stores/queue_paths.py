"""The files_changed path union: how a storm of files_changed events folds into one queue row.

The row keeps the sorted union of the paths, capped at MAX_PATHS (the rest counted in payload["more"]),
and a fingerprint of the kept paths that is cheap to recompute on every merge. Used by autod.stores.queue,
whose transaction the union is written in.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autod.events import Event, EventKind, normalise

MAX_PATHS = 500  # files_changed payload cap; the rest is counted in payload["more"]


@functools.lru_cache(maxsize=65_536)
def _normal_part(part: str) -> bytes:
    return normalise(part).encode("utf-8", "replace") + b"\x00"


def paths_fingerprint(paths: Sequence[str]) -> str:
    """Same value as events.fingerprint("files_changed", *paths), with each path normalised once per process.

    A storm re-fingerprints a 500-path union on every merge; the regex normalisation is what costs.
    """
    data = _normal_part(EventKind.FILES_CHANGED.value) + b"".join(map(_normal_part, paths))
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass
class PathUnion:
    """A files_changed row absorbing a storm in one transaction: rewritten once at commit, not per event."""

    seq: int
    paths: set[str]
    more: int
    payload: dict[str, Any]  # the newest event's payload; paths/more are set from the union on flush
    summary: str
    merged: int = 0
    _fingerprint: str | None = None  # of the kept paths; reset when a fold changes them

    @classmethod
    def of_row(cls, row: sqlite3.Row) -> PathUnion:
        """The union as a pending files_changed row holds it now."""
        payload = json.loads(row["payload"])
        paths = {str(p) for p in payload.get("paths", [])}
        return cls(row["seq"], paths, int(payload.get("more", 0) or 0), payload, row["summary"])

    def fold(self, event: Event) -> None:
        """Take in one more files_changed event: its paths and count of more; its summary and payload win."""
        payload = event.model_dump(mode="json")["payload"]
        self.paths.update(str(p) for p in payload.get("paths", []))
        self.more += int(payload.get("more", 0) or 0)
        self.payload, self.summary = payload, event.summary
        self.merged += event.merged
        self._fingerprint = None

    def kept_paths(self) -> list[str]:
        """The paths the row keeps: the first MAX_PATHS in sorted order."""
        return sorted(self.paths)[:MAX_PATHS]

    def fingerprint(self) -> str:
        """Fingerprint of the kept paths, cached until the next fold."""
        if self._fingerprint is None:
            self._fingerprint = paths_fingerprint(self.kept_paths())
        return self._fingerprint

    def flush(self, db: sqlite3.Connection) -> None:
        """Write the union into its row (autod.stores.queue's events and counters tables), in the
        caller's transaction."""
        kept = self.kept_paths()
        more = self.more + max(0, len(self.paths) - MAX_PATHS)
        payload = {k: v for k, v in self.payload.items() if k != "more"}
        payload["paths"] = kept
        if more:
            payload["more"] = more
        db.execute(
            "UPDATE events SET summary = ?, payload = ?, fingerprint = ?, merged = merged + ? WHERE seq = ?",
            (self.summary, json.dumps(payload), self.fingerprint(), self.merged, self.seq),
        )
        db.execute("UPDATE counters SET value = value + ? WHERE name = 'merged_total'", (self.merged,))
