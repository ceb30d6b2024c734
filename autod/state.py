"""SQLite state: cycle journal, counters, fingerprints (attempts, quarantine), proposals, flags."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from autod.filemodes import private_file
from autod.threads import named_pool

T = TypeVar("T")

SCHEMA_VERSION = 1
CUT_SHORT_LIMIT = 3  # cycles of one event cut short by a crash or stop before it counts as done
_SCHEMA = """
CREATE TABLE IF NOT EXISTS cycles (
    id TEXT PRIMARY KEY,
    event_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    kind TEXT NOT NULL,
    summary TEXT NOT NULL,
    status TEXT,                 -- NULL while running
    reason TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    record TEXT                  -- the reflection record (JSON)
);
CREATE INDEX IF NOT EXISTS cycles_started ON cycles(started_at);
CREATE INDEX IF NOT EXISTS cycles_event ON cycles(event_id, mode);
CREATE TABLE IF NOT EXISTS counters (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS fingerprints (
    fingerprint TEXT PRIMARY KEY,
    summary TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_status TEXT,
    last_attempt TEXT,           -- JSON: the last rolled-back attempt (diff, check output) for the next plan
    quarantined_at REAL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS proposals (
    id TEXT PRIMARY KEY,
    cycle_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    event TEXT NOT NULL,         -- JSON Event
    plan TEXT NOT NULL,          -- JSON Plan
    diff TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',   -- pending | approved | rejected | expired | applied | failed
    decided_at REAL,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def day_key(ts: float | None = None) -> str:
    return datetime.fromtimestamp(ts if ts is not None else time.time(), UTC).strftime("%Y-%m-%d")


class StateError(Exception):
    pass


class State:
    """One connection, used from one worker thread; async callers go through :meth:`call`."""

    def __init__(self, path: Path) -> None:
        private_file(path)  # 0600 before sqlite opens it; its -wal/-shm take the same mode
        self.path = path
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StateError(f"{path}: state db schema {version} is newer than this autod ({SCHEMA_VERSION})")
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._pool = named_pool("autod-state", 1)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._lock:
            self._db.close()

    def _tx(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, params)

    # -- cycles --------------------------------------------------------------------
    def cycle_started(
        self, cycle_id: str, event_id: str, mode: str, fingerprint: str, kind: str, summary: str
    ) -> None:
        self._tx(
            "INSERT INTO cycles(id, event_id, mode, fingerprint, kind, summary, started_at)"
            " VALUES (?,?,?,?,?,?,?)",
            (cycle_id, event_id, mode, fingerprint, kind, summary, time.time()),
        )

    def cycle_finished(self, cycle_id: str, status: str, reason: str | None, record: dict[str, Any]) -> None:
        self._tx(
            "UPDATE cycles SET status=?, reason=?, finished_at=?, record=? WHERE id=?",
            (status, reason, time.time(), json.dumps(record, default=str), cycle_id),
        )

    def cycles_interrupted(self) -> list[str]:
        """Cycles started but never finished (the daemon died): marked failed at start-up."""
        rows = self._tx("SELECT id FROM cycles WHERE status IS NULL").fetchall()
        ids = [r["id"] for r in rows]
        for cid in ids:
            self._tx(
                "UPDATE cycles SET status='failed', reason='interrupted: daemon stopped mid-cycle',"
                " finished_at=? WHERE id=?",
                (time.time(), cid),
            )
        return ids

    def modes_done(self, event_id: str) -> set[str]:
        """Modes whose cycle handled this event (skipped when the event comes back after a restart)."""
        # A cycle cut short by a crash (marked at start-up) or by a stop did not handle its event: the
        # event stayed queued to run again. After CUT_SHORT_LIMIT such tries it counts as done, so an
        # event whose cycle kills the daemon cannot crash-loop it.
        rows = self._tx(
            "SELECT mode, SUM(CASE WHEN COALESCE(reason, '') LIKE 'interrupted:%'"
            " OR COALESCE(reason, '') LIKE 'stopped:%' THEN 1 ELSE 0 END) AS cut, COUNT(*) AS n"
            " FROM cycles WHERE event_id=? AND status IS NOT NULL GROUP BY mode",
            (event_id,),
        ).fetchall()
        return {r["mode"] for r in rows if r["cut"] < r["n"] or r["cut"] >= CUT_SHORT_LIMIT}

    def history(self, n: int = 20) -> list[dict[str, Any]]:
        rows = self._tx(
            "SELECT id, event_id, mode, fingerprint, kind, summary, status, reason, started_at, finished_at,"
            " record FROM cycles ORDER BY started_at DESC LIMIT ?",
            (n,),
        ).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            rec = json.loads(d.pop("record")) if d.get("record") else {}
            d["edits"] = rec.get("edits", [])
            d["checks"] = rec.get("checks", [])
            d["tokens"] = rec.get("tokens", {})
            d["durations_ms"] = rec.get("durations_ms", {})
            d["rollback"] = rec.get("rollback")
            out.append(d)
        return out

    def cycles_since(self, ts: float) -> int:
        return int(self._tx("SELECT COUNT(*) FROM cycles WHERE started_at >= ?", (ts,)).fetchone()[0])

    def last_cycle_started(self) -> float | None:
        row = self._tx("SELECT MAX(started_at) FROM cycles").fetchone()
        return row[0] if row and row[0] is not None else None

    def counts_by_status(self) -> dict[str, int]:
        rows = self._tx("SELECT status, COUNT(*) AS n FROM cycles GROUP BY status").fetchall()
        return {(r["status"] or "running"): r["n"] for r in rows}

    # -- counters --------------------------------------------------------------------
    def add(self, key: str, n: int) -> int:
        with self._lock:
            self._db.execute(
                "INSERT INTO counters(key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = value + excluded.value",
                (key, n),
            )
            return int(self._db.execute("SELECT value FROM counters WHERE key=?", (key,)).fetchone()[0])

    def get(self, key: str) -> int:
        row = self._tx("SELECT value FROM counters WHERE key=?", (key,)).fetchone()
        return int(row[0]) if row else 0

    # -- fingerprints ------------------------------------------------------------------
    def fingerprint(self, fp: str) -> dict[str, Any] | None:
        row = self._tx("SELECT * FROM fingerprints WHERE fingerprint=?", (fp,)).fetchone()
        if row is None:
            return None
        d = dict(row)
        d["last_attempt"] = json.loads(d["last_attempt"]) if d["last_attempt"] else None
        return d

    def fingerprint_attempted(
        self, fp: str, summary: str, status: str, last_attempt: dict[str, Any] | None
    ) -> int:
        """Count one attempt on a failure; returns the attempts so far."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO fingerprints(fingerprint, summary, attempts, last_status, last_attempt,"
                " updated_at)"
                " VALUES (?,?,1,?,?,?) ON CONFLICT(fingerprint) DO UPDATE SET attempts=attempts+1,"
                " summary=excluded.summary, last_status=excluded.last_status,"
                " last_attempt=COALESCE(excluded.last_attempt, last_attempt), updated_at=excluded.updated_at",
                (fp, summary[:500], status, json.dumps(last_attempt) if last_attempt else None, now),
            )
            return int(
                self._db.execute("SELECT attempts FROM fingerprints WHERE fingerprint=?", (fp,)).fetchone()[0]
            )

    def fingerprint_resolved(self, fp: str) -> None:
        self._tx(
            "UPDATE fingerprints SET attempts=0, last_attempt=NULL, quarantined_at=NULL, last_status='fixed',"
            " updated_at=? WHERE fingerprint=?",
            (time.time(), fp),
        )

    def quarantine(self, fp: str) -> None:
        self._tx("UPDATE fingerprints SET quarantined_at=? WHERE fingerprint=?", (time.time(), fp))

    def quarantined(self) -> list[dict[str, Any]]:
        rows = self._tx(
            "SELECT fingerprint, summary, attempts, quarantined_at FROM fingerprints"
            " WHERE quarantined_at IS NOT NULL ORDER BY quarantined_at DESC"
        ).fetchall()
        return [dict(r) for r in rows]

    def release_quarantine(self, fp: str) -> bool:
        cur = self._tx("UPDATE fingerprints SET quarantined_at=NULL, attempts=0 WHERE fingerprint=?", (fp,))
        return cur.rowcount > 0

    def recurring(self, n: int = 20) -> list[dict[str, Any]]:
        rows = self._tx(
            "SELECT fingerprint, MAX(summary) AS summary, COUNT(*) AS cycles,"
            " SUM(status='fixed') AS fixed, MAX(started_at) AS last_seen"
            " FROM cycles WHERE kind IN ('check_failed','build_failed')"
            " GROUP BY fingerprint ORDER BY cycles DESC, last_seen DESC LIMIT ?",
            (n,),
        ).fetchall()
        return [dict(r) for r in rows]

    # -- proposals --------------------------------------------------------------------
    def add_proposal(self, p: dict[str, Any]) -> None:
        self._tx(
            "INSERT INTO proposals(id, cycle_id, mode, event, plan, diff, created_at, expires_at)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (
                p["id"],
                p["cycle_id"],
                p["mode"],
                p["event"],
                p["plan"],
                p["diff"],
                p["created_at"],
                p["expires_at"],
            ),
        )

    def proposals(self, status: str | None = "pending") -> list[dict[str, Any]]:
        if status is None:
            rows = self._tx("SELECT * FROM proposals ORDER BY created_at DESC").fetchall()
        else:
            rows = self._tx(
                "SELECT * FROM proposals WHERE status=? ORDER BY created_at DESC", (status,)
            ).fetchall()
        return [dict(r) for r in rows]

    def proposal(self, pid: str) -> dict[str, Any] | None:
        rows = self._tx("SELECT * FROM proposals WHERE id=? OR id LIKE ?", (pid, pid + "%")).fetchall()
        return dict(rows[0]) if len(rows) == 1 else None

    def decide_proposal(self, pid: str, status: str, reason: str | None = None) -> None:
        self._tx(
            "UPDATE proposals SET status=?, decided_at=?, reason=? WHERE id=?",
            (status, time.time(), reason, pid),
        )

    def expire_proposals(self, now: float | None = None) -> list[str]:
        now = now if now is not None else time.time()
        rows = self._tx(
            "SELECT id FROM proposals WHERE status='pending' AND expires_at <= ?", (now,)
        ).fetchall()
        ids = [r["id"] for r in rows]
        for pid in ids:
            self.decide_proposal(pid, "expired", "not approved in time")
        return ids

    # -- flags --------------------------------------------------------------------
    def set_kv(self, key: str, value: Any) -> None:
        self._tx(
            "INSERT INTO kv(key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, json.dumps(value, default=str)),
        )

    def get_kv(self, key: str, default: Any = None) -> Any:
        row = self._tx("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default
