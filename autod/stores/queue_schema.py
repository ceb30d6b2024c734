"""The queue db's schema and its migrations (each step takes version N-1 to N, once, events kept)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class QueueSchemaError(RuntimeError):
    """queue.db was written by a newer autod (unknown schema version)."""


SCHEMA_VERSION = 3


_SCHEMA = """
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,  -- tie-break: insertion order
    id          TEXT NOT NULL UNIQUE,
    source      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    summary     TEXT NOT NULL,
    payload     TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_ts  REAL NOT NULL,
    priority    INTEGER NOT NULL,
    merged      INTEGER NOT NULL DEFAULT 1,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'in_flight')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    done_modes  TEXT NOT NULL DEFAULT '[]',
    leased_at   REAL
);
CREATE INDEX events_order ON events (status, priority, created_ts, seq);
CREATE INDEX events_fp ON events (fingerprint, status);
CREATE INDEX events_source ON events (source, kind, status);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES
    ('n_pending', 0), ('n_in_flight', 0), ('merged_total', 0), ('dropped_total', 0);
-- Row counts kept by triggers so the bound check is O(1) and always agrees with the table.
CREATE TRIGGER events_ins AFTER INSERT ON events BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'n_' || NEW.status;
END;
CREATE TRIGGER events_del AFTER DELETE ON events BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'n_' || OLD.status;
END;
CREATE TRIGGER events_upd AFTER UPDATE OF status ON events WHEN OLD.status <> NEW.status BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'n_' || OLD.status;
    UPDATE counters SET value = value + 1 WHERE name = 'n_' || NEW.status;
END;
"""

# Each step takes the schema from version N-1 to N; a new file runs them all after _SCHEMA (version 1).
_MIGRATIONS: dict[int, list[str]] = {
    2: [  # retries: an event whose cycle failed for a reason outside the repository waits, then runs again
        "ALTER TABLE events ADD COLUMN not_before REAL",  # NULL: leasable now
        "ALTER TABLE events ADD COLUMN retries INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE events ADD COLUMN last_error TEXT",
        "ALTER TABLE events ADD COLUMN deferred_at REAL",
    ],
    # what a deferred event waits for (autod.stores.queue_retries): an LLM outage is retried when it ends
    3: [
        "ALTER TABLE events ADD COLUMN retry_kind TEXT",
    ],
}


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring a queue db (inside the caller's write transaction) to SCHEMA_VERSION."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise QueueSchemaError(
            f"{path}: queue schema version {version} is newer than this autod supports "
            f"({SCHEMA_VERSION}); upgrade autod or move the file aside"
        )
    if version == 0:
        for statement in split_sql(_SCHEMA):
            db.execute(statement)
        version = 1
    for step in range(version + 1, SCHEMA_VERSION + 1):
        for statement in _MIGRATIONS[step]:
            db.execute(statement)
    if version != SCHEMA_VERSION:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def split_sql(script: str) -> list[str]:
    """Statements of the schema script; triggers hold inner ';' so split on complete statements."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return [s for s in statements if s]
