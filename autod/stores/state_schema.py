"""The state db's schema and its migrations: each step takes version N-1 to N, once, keeping old rows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from autod.stores.sqlite import Schema


class StateError(Exception):
    pass


SCHEMA_VERSION = 2
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
    decided_at REAL,                          --   | superseded (a newer plan) | withdrawn (failure resolved)
    reason TEXT
);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# Rows in `cycles` with this status are events resolved without a cycle (autod.runtime.freshness): listed in
# history, never counted by the rate limits.
RESOLVED = "resolved"
# What the row of a cycle whose plan became a proposal says once the operator (or time) decided.
DECISION_STATUS = {
    "approved": "approved",
    "applied": "approved",
    "failed": "approved",
    "rejected": "rejected",
    "expired": "expired",
    "superseded": "superseded",
    "withdrawn": "withdrawn",
}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()}


def _to_v2(db: sqlite3.Connection) -> None:
    """Fingerprints and proposals learn their check (quarantine lifts, proposals are withdrawn when it
    passes) and proposals their fingerprint (one pending per fingerprint). Old rows are kept and filled in."""
    if "check_name" not in _columns(db, "fingerprints"):
        db.execute("ALTER TABLE fingerprints ADD COLUMN check_name TEXT")
    have = _columns(db, "proposals")
    for col in ("fingerprint", "check_name"):
        if col not in have:
            db.execute(f"ALTER TABLE proposals ADD COLUMN {col} TEXT")
    for row in db.execute("SELECT id, event, status, cycle_id, reason FROM proposals").fetchall():
        try:
            event = json.loads(row[1])
        except ValueError:
            continue
        check = (event.get("payload") or {}).get("check")
        db.execute(
            "UPDATE proposals SET fingerprint = ?, check_name = ? WHERE id = ?",
            (event.get("fingerprint"), check if isinstance(check, str) else None, row[0]),
        )
        if row[2] in DECISION_STATUS:  # v1 left decided proposals' cycles saying pending_approval
            db.execute(
                "UPDATE cycles SET status = ?, reason = COALESCE(?, reason) WHERE id = ?"
                " AND status = 'pending_approval'",
                (DECISION_STATUS[row[2]], row[4], row[3]),
            )
    db.execute("CREATE INDEX IF NOT EXISTS proposals_fp ON proposals(fingerprint, status)")


def _newer(path: Path, version: int, supported: int) -> StateError:
    return StateError(f"{path}: state db schema {version} is newer than this autod ({supported})")


SCHEMA = Schema(_SCHEMA, SCHEMA_VERSION, {2: _to_v2}, _newer)
