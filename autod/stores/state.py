"""SQLite state: cycle journal, counters, fingerprints (attempts, quarantine), proposals, flags."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autod import logs
from autod.stores.sqlite import SqliteStore
from autod.stores.state_schema import _SCHEMA, DECISION_STATUS, RESOLVED, SCHEMA, SCHEMA_VERSION, StateError

__all__ = ["RESOLVED", "SCHEMA_VERSION", "_SCHEMA", "State", "StateError", "day_key"]

# The cycles max_cycles_per_hour counts: not an event resolved without a cycle, and not a cycle that
# failed for a reason outside the repository (its record's `external`: an LLM outage must not spend the
# hour's cycles, or the fix waits for the cap long after the LLM is back). A running cycle counts.
_RATED = "COALESCE(status, '') != ? AND COALESCE(json_extract(record, '$.external'), 0) = 0"
CUT_SHORT_LIMIT = 3  # cycles of one event cut short by a crash or stop before it counts as done


def day_key(ts: float | None = None) -> str:
    return datetime.fromtimestamp(ts if ts is not None else time.time(), UTC).strftime("%Y-%m-%d")


class State(SqliteStore):
    """One connection behind the store's lock; async callers go through :meth:`call` (its worker thread)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA, rows=True, worker="autod-state")

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
        # The state db's choke point: nothing a record quotes (a plan's summary, a check's words in a
        # reason) is stored with a configured secret in it, in any form (autod.safety.secretforms).
        reason = logs.redact_secrets(reason) if reason else reason
        self._tx(
            "UPDATE cycles SET status=?, reason=?, finished_at=?, record=? WHERE id=?",
            (status, reason, time.time(), json.dumps(logs.redact_tree(record), default=str), cycle_id),
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

    def modes_done(self, event_id: str, since: float | None = None) -> set[str]:
        """Modes whose cycle handled this event (skipped when the event comes back after a restart).

        `since`: when the event was last deferred to be tried again; the cycles before it did not finish
        with it."""
        # A cycle cut short by a crash (marked at start-up) or by a stop did not handle its event: the
        # event stayed queued to run again. After CUT_SHORT_LIMIT such tries it counts as done, so an
        # event whose cycle kills the daemon cannot crash-loop it.
        rows = self._tx(
            "SELECT mode, SUM(CASE WHEN COALESCE(reason, '') LIKE 'interrupted:%'"
            " OR COALESCE(reason, '') LIKE 'stopped:%' THEN 1 ELSE 0 END) AS cut, COUNT(*) AS n"
            " FROM cycles WHERE event_id=? AND status IS NOT NULL AND status != ? AND started_at >= ?"
            " GROUP BY mode",
            (event_id, RESOLVED, since or 0.0),
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
            d["delivery"] = rec.get("delivery")  # a branch or patch delivery (autod.delivery)
            d["candidates"] = rec.get("candidates", [])
            out.append(d)
        return out

    def cycle_record(self, prefix: str) -> list[dict[str, Any]]:
        """The cycles whose id starts with `prefix` (row and reflection record), newest first."""
        if not prefix or any(c not in "0123456789abcdef" for c in prefix):
            return []
        rows = self._tx(
            "SELECT id, event_id, mode, fingerprint, kind, summary, status, reason, started_at, finished_at,"
            " record FROM cycles WHERE id LIKE ? ORDER BY started_at DESC LIMIT 5",
            (prefix + "%",),
        ).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            d["record"] = json.loads(d["record"]) if d.get("record") else {}
            out.append(d)
        return out

    def cycles_since(self, ts: float) -> int:
        """Cycles started since `ts` that count toward max_cycles_per_hour (see _RATED)."""
        sql = f"SELECT COUNT(*) FROM cycles WHERE started_at >= ? AND {_RATED}"
        return int(self._tx(sql, (ts, RESOLVED)).fetchone()[0])

    def cycle_starts_since(self, ts: float) -> list[float]:
        """Start times of the rated cycles since `ts`, oldest first (when the hourly cap frees a slot)."""
        rows = self._tx(
            f"SELECT started_at FROM cycles WHERE started_at >= ? AND {_RATED}"
            " ORDER BY started_at",
            (ts, RESOLVED),
        ).fetchall()
        return [float(r[0]) for r in rows]

    def last_cycle_started(self) -> float | None:
        row = self._tx(
            "SELECT MAX(started_at) FROM cycles WHERE COALESCE(status, '') != ?", (RESOLVED,)
        ).fetchone()
        return row[0] if row and row[0] is not None else None

    def event_resolved(self, event_id: str, fingerprint: str, kind: str, summary: str, reason: str) -> str:
        """Record an event resolved without a cycle (its failure gone or superseded); returns the row id."""
        rid = uuid.uuid4().hex[:12]
        now = time.time()
        self._tx(
            "INSERT INTO cycles(id, event_id, mode, fingerprint, kind, summary, status, reason, started_at,"
            " finished_at, record) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (rid, event_id, "-", fingerprint, kind, summary, RESOLVED, reason, now, now, json.dumps({})),
        )
        return rid

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
        self,
        fp: str,
        summary: str,
        status: str,
        last_attempt: dict[str, Any] | None,
        check: str | None = None,
    ) -> int:
        """Count one attempt on a failure (of `check`, when a check found it); returns the attempts so far."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO fingerprints(fingerprint, summary, attempts, last_status, last_attempt,"
                " updated_at, check_name)"
                " VALUES (?,?,1,?,?,?,?) ON CONFLICT(fingerprint) DO UPDATE SET attempts=attempts+1,"
                " summary=excluded.summary, last_status=excluded.last_status,"
                " last_attempt=COALESCE(excluded.last_attempt, last_attempt), updated_at=excluded.updated_at,"
                " check_name=COALESCE(excluded.check_name, check_name)",
                (fp, summary[:500], status, json.dumps(last_attempt) if last_attempt else None, now, check),
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
            "SELECT fingerprint, summary, attempts, quarantined_at, check_name FROM fingerprints"
            " WHERE quarantined_at IS NOT NULL ORDER BY quarantined_at DESC"
        ).fetchall()
        return [dict(r) for r in rows]

    def release_quarantine(self, fp: str) -> list[str]:
        """Lift the quarantine of one fingerprint (or a unique prefix of one); returns what was lifted."""
        with self._lock:
            rows = self._db.execute(
                "SELECT fingerprint FROM fingerprints WHERE quarantined_at IS NOT NULL"
                " AND (fingerprint = ? OR fingerprint LIKE ?)",
                (fp, fp.replace("%", "").replace("_", "") + "%"),
            ).fetchall()
            exact = [r[0] for r in rows if r[0] == fp]
            lifted = exact or ([rows[0][0]] if len(rows) == 1 else [])
            for one in lifted:
                self._lift(one)
            return lifted

    def release_all_quarantine(self) -> list[str]:
        with self._lock:
            lifted = [r[0] for r in self._db.execute(
                "SELECT fingerprint FROM fingerprints WHERE quarantined_at IS NOT NULL"
            ).fetchall()]
            for one in lifted:
                self._lift(one)
            return lifted

    def check_passed(self, check: str) -> list[str]:
        """A check went green: every failure it had is resolved, quarantine included. Returns the
        fingerprints whose quarantine was lifted."""
        with self._lock:
            rows = self._db.execute(
                "SELECT fingerprint, quarantined_at FROM fingerprints WHERE check_name = ?"
                " AND (attempts > 0 OR quarantined_at IS NOT NULL)",
                (check,),
            ).fetchall()
            for r in rows:
                self._lift(r[0])
            return [r[0] for r in rows if r[1] is not None]

    def _lift(self, fp: str) -> None:
        self._db.execute(
            "UPDATE fingerprints SET quarantined_at=NULL, attempts=0, last_attempt=NULL, updated_at=?"
            " WHERE fingerprint=?",
            (time.time(), fp),
        )

    def recurring(self, n: int = 20) -> list[dict[str, Any]]:
        rows = self._tx(
            "SELECT fingerprint, MAX(summary) AS summary, COUNT(*) AS cycles,"
            " SUM(status='fixed') AS fixed, MAX(started_at) AS last_seen"
            " FROM cycles WHERE kind IN ('check_failed','build_failed') AND COALESCE(status, '') != ?"
            " GROUP BY fingerprint ORDER BY cycles DESC, last_seen DESC LIMIT ?",
            (RESOLVED, n),
        ).fetchall()
        return [dict(r) for r in rows]

    # -- proposals --------------------------------------------------------------------
    def add_proposal(self, p: dict[str, Any]) -> list[str]:
        """Store a proposal; the pending proposals of the same mode and fingerprint are superseded by it
        (one pending proposal per failure). Returns the ids superseded."""
        event = json.loads(p["event"])
        fp = event.get("fingerprint")
        check = (event.get("payload") or {}).get("check")
        with self._lock:
            older = [r[0] for r in self._db.execute(
                "SELECT id FROM proposals WHERE status='pending' AND mode=? AND fingerprint=?",
                (p["mode"], fp),
            ).fetchall()]
            self._db.execute(
                "INSERT INTO proposals(id, cycle_id, mode, event, plan, diff, created_at, expires_at,"
                " fingerprint, check_name) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    p["id"],
                    p["cycle_id"],
                    p["mode"],
                    p["event"],
                    p["plan"],
                    p["diff"],
                    p["created_at"],
                    p["expires_at"],
                    fp,
                    check if isinstance(check, str) else None,
                ),
            )
            for pid in older:
                self.decide_proposal(pid, "superseded", f"replaced by proposal {p['id']}")
        return older

    def withdraw_proposals(
        self, reason: str, *, fingerprint: str | None = None, check: str | None = None
    ) -> list[str]:
        """Pending proposals whose failure is resolved (its fingerprint, or anything its check found)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM proposals WHERE status='pending' AND (fingerprint=? OR check_name=?)",
                (fingerprint, check),
            ).fetchall()
            for r in rows:
                self.decide_proposal(r[0], "withdrawn", reason)
        return [r[0] for r in rows]

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
        """Record the decision on the proposal and on the row of the cycle that proposed it."""
        with self._lock:
            self._db.execute(
                "UPDATE proposals SET status=?, decided_at=?, reason=? WHERE id=?",
                (status, time.time(), reason, pid),
            )
            self._decided_cycle(pid, status, reason)

    def claim_proposal(self, pid: str, status: str, reason: str | None = None) -> bool:
        """Move a pending, unexpired proposal to `status` (approved, rejected) in one statement.

        False when it is no longer pending or has expired: another approve or reject got there first,
        and this request must not act on it (two concurrent approves apply a plan once)."""
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "UPDATE proposals SET status=?, decided_at=?, reason=?"
                " WHERE id=? AND status='pending' AND expires_at > ?",
                (status, now, reason, pid, now),
            )
            if cur.rowcount != 1:
                return False
            self._decided_cycle(pid, status, reason)
            return True

    def _decided_cycle(self, pid: str, status: str, reason: str | None) -> None:
        cycle_status = DECISION_STATUS.get(status)
        if cycle_status is not None:
            why = f"proposal {pid} {status}" + (f": {reason}" if reason else "")
            self._db.execute(
                "UPDATE cycles SET status=?, reason=? WHERE id=(SELECT cycle_id FROM proposals WHERE id=?)",
                (cycle_status, why[:500], pid),
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
