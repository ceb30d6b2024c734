"""The memory's local ledger: ``<state_dir>/memory-spool.db`` (sqlite, 0600).

- ``spool``: every write the daemon accepted (observations, episodes, lessons, lesson-use marks),
  in order, until the store has it. Writes go here first and a writer replays them to the store,
  so an outage, a hung server or a crash loses nothing; each item keeps the id it was given here,
  so a write replayed after a timeout that had in fact landed is an idempotent upsert.
- ``dropped``: what a full spool had to give up, per tier (persisted: a restart does not hide it).
  The least valuable go first: lesson-use marks, then observations, then episodes, then lessons.
- ``tally``: per tier, how many items this daemon has in the store and their time range, kept as
  it writes and prunes, so ``memory stats`` never scans a collection.

Every method is blocking and thread-safe (one connection behind a lock: the store base,
``autod.stores.sqlite``); the async side calls them through ``asyncio.to_thread``, the memory thread
directly.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autod.stores.sqlite import Schema, SqliteStore

FILE_NAME = "memory-spool.db"
KINDS = ("n0", "n1", "n2", "used")
EVICT_ORDER = ("used", "n0", "n1", "n2")  # least valuable first

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spool (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    item_id TEXT NOT NULL,
    text TEXT NOT NULL,
    meta TEXT NOT NULL,
    success INTEGER,
    ts REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS spool_kind ON spool (kind, seq);
CREATE TABLE IF NOT EXISTS dropped (kind TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tally (
    tier TEXT PRIMARY KEY, own INTEGER NOT NULL, oldest REAL, newest REAL, reconciled REAL
);
"""


@dataclass(frozen=True)
class Row:
    seq: int
    kind: str
    item_id: str
    text: str
    meta: dict[str, Any]
    success: bool | None
    ts: float
    attempts: int


class Spool(SqliteStore):
    """The ledger; ``max_items`` bounds the spool table, never the tally or the drop counts."""

    def __init__(self, path: Path, max_items: int = 50_000, *, read_only: bool = False) -> None:
        self.max_items = max_items
        self.read_only = read_only
        # NORMAL in WAL mode: a crash of autod loses nothing; only a power cut may lose the last
        # commits, and a commit costs no fsync on the observe path.
        super().__init__(
            path, Schema(_SCHEMA), synchronous="NORMAL", busy_timeout_s=5.0, reset_mode=True,
            read_only=read_only,
        )
        self._counts = {k: 0 for k in KINDS}
        for kind, n in self._db.execute("SELECT kind, COUNT(*) FROM spool GROUP BY kind"):
            self._counts[kind] = int(n)

    @classmethod
    def existing(cls, state_dir: Path) -> Spool | None:
        """The ledger read-only, if the daemon ever made one (a CLI look while it is down)."""
        path = Path(state_dir) / FILE_NAME
        if not path.exists():
            return None
        try:
            return cls(path, read_only=True)
        except sqlite3.Error:
            return None

    # -- the spool -----------------------------------------------------------------------
    def append(
        self,
        kind: str,
        item_id: str,
        text: str,
        meta: dict[str, Any],
        *,
        success: bool | None = None,
        ts: float | None = None,
    ) -> tuple[int, dict[str, int]]:
        """Add one write at the tail; returns its seq and what the bound made it drop (per kind)."""
        if kind not in KINDS:
            raise ValueError(f"unknown spool kind {kind!r}")
        with self._lock:
            dropped = self._make_room()
            cur = self._db.execute(
                "INSERT INTO spool (kind, item_id, text, meta, success, ts) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    item_id,
                    text,
                    json.dumps(meta, default=str),
                    None if success is None else int(success),
                    time.time() if ts is None else ts,
                ),
            )
            self._counts[kind] += 1
            return int(cur.lastrowid or 0), dropped

    def append_marks(self, lesson_ids: list[str], ts: float) -> dict[str, int]:
        """Lesson-use marks (recalled at ts), in one transaction; returns what the bound dropped."""
        dropped: dict[str, int] = {}
        with self._lock:
            self._db.execute("BEGIN")
            for lesson_id in lesson_ids:
                for kind, n in self._make_room().items():
                    dropped[kind] = dropped.get(kind, 0) + n
                self._db.execute(
                    "INSERT INTO spool (kind, item_id, text, meta, ts) VALUES ('used', ?, '', '{}', ?)",
                    (lesson_id, ts),
                )
                self._counts["used"] += 1
            self._db.execute("COMMIT")
        return dropped

    def _make_room(self) -> dict[str, int]:
        dropped: dict[str, int] = {}
        while sum(self._counts.values()) >= self.max_items:
            kind = next(k for k in EVICT_ORDER if self._counts[k] > 0)
            self._db.execute(
                "DELETE FROM spool WHERE seq = (SELECT MIN(seq) FROM spool WHERE kind = ?)", (kind,)
            )
            self._counts[kind] -= 1
            dropped[kind] = dropped.get(kind, 0) + 1
            self._count_dropped(kind, 1)
        return dropped

    def head(self, limit: int) -> list[Row]:
        """The oldest writes not yet in the store, in order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, kind, item_id, text, meta, success, ts, attempts"
                " FROM spool ORDER BY seq LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            Row(s, k, i, t, json.loads(m), None if ok is None else bool(ok), ts, a)
            for s, k, i, t, m, ok, ts, a in rows
        ]

    def ack(self, rows: list[Row]) -> None:
        """These writes are in the store: forget them."""
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("DELETE FROM spool WHERE seq = ?", [(r.seq,) for r in rows])
            self._db.execute("COMMIT")
            for r in rows:
                self._counts[r.kind] -= 1

    def failed(self, row: Row) -> int:
        """Count one more failed attempt at this write; returns the attempts so far."""
        with self._lock:
            self._db.execute("UPDATE spool SET attempts = attempts + 1 WHERE seq = ?", (row.seq,))
        return row.attempts + 1

    def drop(self, rows: list[Row]) -> None:
        """Give up on writes the store keeps refusing (counted as dropped, per kind)."""
        self.ack(rows)
        with self._lock:
            for r in rows:
                self._count_dropped(r.kind, 1)

    def pending(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def __len__(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def last_seq(self, kinds: tuple[str, ...]) -> int:
        """The newest seq of these kinds still spooled (0: none)."""
        marks = ",".join("?" * len(kinds))
        with self._lock:
            (seq,) = self._db.execute(
                f"SELECT COALESCE(MAX(seq), 0) FROM spool WHERE kind IN ({marks})", kinds
            ).fetchone()
        return int(seq)

    # -- drop counts -----------------------------------------------------------------------
    def _count_dropped(self, kind: str, n: int) -> None:
        self._db.execute(
            "INSERT INTO dropped (kind, n) VALUES (?, ?) ON CONFLICT(kind) DO UPDATE SET n = n + excluded.n",
            (kind, n),
        )

    def dropped(self) -> dict[str, int]:
        with self._lock:
            got = dict(self._db.execute("SELECT kind, n FROM dropped").fetchall())
        return {k: int(got.get(k, 0)) for k in KINDS}

    # -- the tally -------------------------------------------------------------------------
    def tally(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT tier, own, oldest, newest, reconciled FROM tally").fetchall()
        return {
            t: {"own": int(own), "oldest_ts": old, "newest_ts": new, "reconciled": rec}
            for t, own, old, new, rec in rows
        }

    def tally_added(self, tier: str, n: int, oldest: float, newest: float) -> None:
        """n new items of this daemon reached the store."""
        with self._lock:
            self._db.execute(
                "INSERT INTO tally (tier, own, oldest, newest) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(tier) DO UPDATE SET own = own + excluded.own,"
                " oldest = MIN(COALESCE(oldest, excluded.oldest), excluded.oldest),"
                " newest = MAX(COALESCE(newest, excluded.newest), excluded.newest)",
                (tier, n, oldest, newest),
            )

    def tally_removed(self, tier: str, n: int, *, older_than: float | None = None) -> None:
        """n items went (a prune); with older_than, none left is older than that."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO tally (tier, own) VALUES (?, 0)", (tier,))
            self._db.execute("UPDATE tally SET own = MAX(0, own - ?) WHERE tier = ?", (n, tier))
            if older_than is not None:
                self._db.execute(
                    "UPDATE tally SET oldest = MAX(oldest, ?) WHERE tier = ?", (older_than, tier)
                )

    def tally_set(
        self,
        tier: str,
        own: int,
        *,
        oldest: float | None = None,
        newest: float | None = None,
        exact_range: bool = False,
    ) -> None:
        """Reconcile with a count (and, with exact_range, a time range) read from the store."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO tally (tier, own) VALUES (?, 0)", (tier,))
            self._db.execute(
                "UPDATE tally SET own = ?, reconciled = ? WHERE tier = ?", (own, time.time(), tier)
            )
            if exact_range or own == 0:
                self._db.execute(
                    "UPDATE tally SET oldest = ?, newest = ? WHERE tier = ?", (oldest, newest, tier)
                )
