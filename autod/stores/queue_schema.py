"""The queue db's schema and its migrations (each step takes version N-1 to N, once, events kept)."""

from __future__ import annotations

from pathlib import Path

from autod.stores.sqlite import Schema, statements


class QueueSchemaError(RuntimeError):
    """queue.db was written by a newer autod (unknown schema version)."""


SCHEMA_VERSION = 3


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
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
CREATE INDEX IF NOT EXISTS events_order ON events (status, priority, created_ts, seq);
CREATE INDEX IF NOT EXISTS events_fp ON events (fingerprint, status);
CREATE INDEX IF NOT EXISTS events_source ON events (source, kind, status);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO counters (name, value) VALUES
    ('n_pending', 0), ('n_in_flight', 0), ('merged_total', 0), ('dropped_total', 0);
-- Row counts kept by triggers so the bound check is O(1) and always agrees with the table.
CREATE TRIGGER IF NOT EXISTS events_ins AFTER INSERT ON events BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'n_' || NEW.status;
END;
CREATE TRIGGER IF NOT EXISTS events_del AFTER DELETE ON events BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'n_' || OLD.status;
END;
CREATE TRIGGER IF NOT EXISTS events_upd AFTER UPDATE OF status ON events WHEN OLD.status <> NEW.status BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'n_' || OLD.status;
    UPDATE counters SET value = value + 1 WHERE name = 'n_' || NEW.status;
END;
"""



def _newer(path: Path, version: int, supported: int) -> QueueSchemaError:
    return QueueSchemaError(
        f"{path}: queue schema version {version} is newer than this autod supports "
        f"({supported}); upgrade autod or move the file aside"
    )


# Each step takes the schema from version N-1 to N; a new file runs them all after _SCHEMA (version 1).
SCHEMA = Schema(
    _SCHEMA,
    SCHEMA_VERSION,
    {
        # retries: an event whose cycle failed for a reason outside the repository waits, then runs again
        2: statements(
            "ALTER TABLE events ADD COLUMN not_before REAL",  # NULL: leasable now
            "ALTER TABLE events ADD COLUMN retries INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE events ADD COLUMN last_error TEXT",
            "ALTER TABLE events ADD COLUMN deferred_at REAL",
        ),
        # what a deferred event waits for (autod.stores.queue_retries): an LLM outage is retried when it ends
        3: statements("ALTER TABLE events ADD COLUMN retry_kind TEXT"),
    },
    _newer,
)
