"""The durable outbox: `<state_dir>/webhooks.db`. One row per (notification, webhook) until its receiver
answers 2xx; bounded (the oldest rows go first, each with a log line); keys already delivered are
remembered for a while, so announcing the same notification again (after a restart) sends nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from autod.stores.sqlite import Schema, SqliteStore

log = structlog.get_logger("autod.webhooks")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,               -- the notification's idempotency key
    hook TEXT NOT NULL,              -- the webhook's name
    event TEXT NOT NULL,
    body BLOB NOT NULL,              -- rendered when announced (json or slack)
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    UNIQUE (key, hook)
);
CREATE TABLE IF NOT EXISTS delivered (
    key TEXT NOT NULL, hook TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (key, hook)
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
DELIVERED_KEEP = 20_000  # keys remembered after delivery (re-announcing one sends nothing)


@dataclass(frozen=True)
class Item:
    seq: int
    key: str
    hook: str
    event: str
    body: bytes
    created_at: float
    attempts: int


class Outbox(SqliteStore):
    """Thread-safe; every method is blocking (callers go through a worker thread)."""

    def __init__(self, path: Path, max_items: int) -> None:
        self.max_items = max_items
        super().__init__(path, Schema(_SCHEMA))

    def _bump(self, name: str, n: int = 1) -> None:
        self._db.execute(
            "INSERT INTO counters(name, value) VALUES (?, ?)"
            " ON CONFLICT(name) DO UPDATE SET value = value + ?",
            (name, n, n),
        )

    def add(self, key: str, hook: str, event: str, body: bytes, now: float | None = None) -> list[Item]:
        """Keep one notification for one webhook (once per key); returns the rows dropped to stay bounded."""
        now = time.time() if now is None else now
        with self._write() as db:
            done = db.execute("SELECT 1 FROM delivered WHERE key=? AND hook=?", (key, hook)).fetchone()
            added = 0
            if done is None:
                added = db.execute(
                    "INSERT OR IGNORE INTO outbox(key, hook, event, body, created_at) VALUES (?,?,?,?,?)",
                    (key, hook, event, body, now),
                ).rowcount
            return self._trim() if added else []

    def _trim(self) -> list[Item]:
        over = self._count() - self.max_items
        if over <= 0:
            return []
        rows = self._db.execute(
            "SELECT seq, key, hook, event, body, created_at, attempts FROM outbox ORDER BY seq LIMIT ?",
            (over,),
        ).fetchall()
        items = [Item(*r) for r in rows]
        for it in items:
            self._db.execute("DELETE FROM outbox WHERE seq=?", (it.seq,))
            self._bump(f"dropped:{it.hook}")
        return items

    def _count(self, hook: str | None = None) -> int:
        if hook is None:
            return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM outbox WHERE hook=?", (hook,)).fetchone()[0])

    def head(self, hook: str) -> Item | None:
        """The oldest notification waiting for `hook` (they go out in order)."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq, key, hook, event, body, created_at, attempts FROM outbox WHERE hook=?"
                " ORDER BY seq LIMIT 1",
                (hook,),
            ).fetchone()
        return Item(*row) if row else None

    def sent(self, item: Item, now: float | None = None) -> None:
        """The receiver answered 2xx: the row goes, its key is remembered."""
        now = time.time() if now is None else now
        with self._write() as db:
            db.execute("DELETE FROM outbox WHERE seq=?", (item.seq,))
            db.execute(
                "INSERT OR REPLACE INTO delivered(key, hook, at) VALUES (?,?,?)", (item.key, item.hook, now)
            )
            self._bump(f"sent:{item.hook}")
            db.execute(
                "DELETE FROM delivered WHERE rowid IN (SELECT rowid FROM delivered ORDER BY at DESC"
                " LIMIT -1 OFFSET ?)",
                (DELIVERED_KEEP,),
            )

    def failed(self, item: Item, error: str) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE seq = ?",
                (error[:300], item.seq),
            )

    def expire(self, older_than: float, keep_hooks: set[str]) -> list[Item]:
        """Drop what is older than `older_than` (epoch) or meant for a webhook no longer configured."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, key, hook, event, body, created_at, attempts FROM outbox ORDER BY seq"
            ).fetchall()
            gone = [Item(*r) for r in rows if r[5] < older_than or r[2] not in keep_hooks]
            for it in gone:
                self._db.execute("DELETE FROM outbox WHERE seq=?", (it.seq,))
                self._bump(f"dropped:{it.hook}")
        return gone

    def figures(self) -> dict[str, dict[str, int]]:
        """Per webhook: queued, sent, dropped (sent and dropped since the outbox was made)."""
        with self._lock:
            queued = dict(self._db.execute("SELECT hook, COUNT(*) FROM outbox GROUP BY hook").fetchall())
            counters = dict(self._db.execute("SELECT name, value FROM counters").fetchall())
        out: dict[str, dict[str, int]] = {}
        for hook, n in queued.items():
            out.setdefault(hook, {"queued": 0, "sent": 0, "dropped": 0})["queued"] = int(n)
        for name, value in counters.items():
            kind, _, hook = name.partition(":")
            out.setdefault(hook, {"queued": 0, "sent": 0, "dropped": 0})[kind] = int(value)
        return out
