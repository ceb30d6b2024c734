"""`<state_dir>/delivery.db`: autod's branches and patches, one per failure (mode and fingerprint), the
delivery each kept cycle made (what `autod undo` takes back), failures held at the cap, and the last
problems (a refused push, a branch someone else changed) that `autod status` shows."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autod.stores.sqlite import Schema, SqliteStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    key TEXT PRIMARY KEY,           -- MODE:FINGERPRINT (one branch or patch per failure)
    kind TEXT NOT NULL,             -- branch | patch
    mode TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    name TEXT NOT NULL,             -- the branch, or the patch file's path
    summary TEXT NOT NULL,
    commit_id TEXT,                 -- the commit autod last wrote there (branch tip, or the patch's commit)
    pushed TEXT,                    -- the commit autod last pushed (NULL: never)
    digest TEXT,                    -- patch: sha256 of the file autod wrote
    state TEXT NOT NULL,            -- open | merged | deleted | changed | withdrawn
    cycle_id TEXT NOT NULL,         -- the cycle that last wrote it
    problem TEXT,                   -- its last problem, NULL when none
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cycles (
    cycle_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    commit_id TEXT,
    parent TEXT,
    files TEXT NOT NULL,            -- JSON [rel]
    digest TEXT,
    at REAL NOT NULL,
    undone_by TEXT
);
CREATE TABLE IF NOT EXISTS held (
    key TEXT PRIMARY KEY, mode TEXT, fingerprint TEXT, summary TEXT, since REAL NOT NULL, seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS problems (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, key TEXT, name TEXT, problem TEXT NOT NULL
);
"""
OPEN = "open"
PROBLEMS_KEPT = 50
HELD_FORGET_S = 7 * 86400


@dataclass
class Row:
    key: str
    kind: str
    mode: str
    fingerprint: str
    name: str
    summary: str
    commit_id: str | None
    pushed: str | None
    digest: str | None
    state: str
    cycle_id: str
    problem: str | None
    created_at: float
    updated_at: float


@dataclass
class CycleDelivery:
    cycle_id: str
    key: str
    kind: str
    name: str
    commit_id: str | None
    parent: str | None
    files: list[str]
    digest: str | None
    at: float
    undone_by: str | None


class DeliveryLedger(SqliteStore):
    """Thread-safe, blocking (callers go through a worker thread)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, Schema(_SCHEMA))

    def get(self, key: str) -> Row | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM deliveries WHERE key=?", (key,)).fetchone()
        return Row(*r) if r else None

    def rows(self, states: tuple[str, ...] | None = None) -> list[Row]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM deliveries ORDER BY updated_at DESC").fetchall()
        out = [Row(*r) for r in rows]
        return [r for r in out if states is None or r.state in states]

    def open_count(self) -> int:
        with self._lock:
            return int(
                self._db.execute("SELECT COUNT(*) FROM deliveries WHERE state=?", (OPEN,)).fetchone()[0]
            )

    def put(self, row: Row) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO deliveries VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    row.key,
                    row.kind,
                    row.mode,
                    row.fingerprint,
                    row.name,
                    row.summary,
                    row.commit_id,
                    row.pushed,
                    row.digest,
                    row.state,
                    row.cycle_id,
                    row.problem,
                    row.created_at,
                    row.updated_at,
                ),
            )
            self._db.execute("DELETE FROM held WHERE key=?", (row.key.split("#")[0],))

    def set_state(self, key: str, state: str, problem: str | None = None) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE deliveries SET state=?, problem=COALESCE(?, problem), updated_at=? WHERE key=?",
                (state, problem, time.time(), key),
            )

    def record_cycle(self, d: CycleDelivery) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO cycles VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    d.cycle_id,
                    d.key,
                    d.kind,
                    d.name,
                    d.commit_id,
                    d.parent,
                    json.dumps(d.files),
                    d.digest,
                    d.at,
                    d.undone_by,
                ),
            )

    def cycle(self, cycle_id: str) -> CycleDelivery | None:
        """The delivery a cycle made (its id or a unique prefix)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM cycles WHERE cycle_id=? OR cycle_id LIKE ?",
                (cycle_id, cycle_id.replace("%", "").replace("_", "") + "%"),
            ).fetchall()
        exact = [r for r in rows if r[0] == cycle_id]
        r = exact[0] if exact else (rows[0] if len(rows) == 1 else None)
        if r is None:
            return None
        return CycleDelivery(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8], r[9])

    def mark_undone(self, cycle_id: str, undo_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE cycles SET undone_by=? WHERE cycle_id=?", (undo_id, cycle_id))

    def problem(self, key: str, name: str, problem: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO problems(at, key, name, problem) VALUES (?,?,?,?)",
                (time.time(), key, name, problem),
            )
            self._db.execute(
                "DELETE FROM problems WHERE seq NOT IN (SELECT seq FROM problems ORDER BY seq DESC LIMIT ?)",
                (PROBLEMS_KEPT,),
            )
            self._db.execute("UPDATE deliveries SET problem=? WHERE key=?", (problem, key))

    def problems(self, n: int = 5) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT at, key, name, problem FROM problems ORDER BY seq DESC LIMIT ?", (n,)
            ).fetchall()
        return [{"at": r[0], "key": r[1], "name": r[2], "problem": r[3]} for r in rows]

    def hold(self, key: str, mode: str, fingerprint: str, summary: str) -> None:
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO held(key, mode, fingerprint, summary, since, seen) VALUES (?,?,?,?,?,?)"
                " ON CONFLICT(key) DO UPDATE SET seen=excluded.seen",
                (key, mode, fingerprint, summary[:300], now, now),
            )

    def held(self) -> list[dict[str, Any]]:
        with self._lock:
            self._db.execute("DELETE FROM held WHERE seen < ?", (time.time() - HELD_FORGET_S,))
            rows = self._db.execute(
                "SELECT key, mode, fingerprint, summary, since FROM held ORDER BY since"
            ).fetchall()
        return [
            {"key": r[0], "mode": r[1], "fingerprint": r[2], "summary": r[3], "since": r[4]} for r in rows
        ]

    def unhold(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM held WHERE key=?", (key,))
