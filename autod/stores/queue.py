"""Durable, coalescing event queue: one SQLite file (state_dir/queue.db) between the sources and the cycle.

An accepted event survives a crash (WAL + synchronous=FULL, one transaction per put); a leased event is
marked in_flight durably and comes back with its attempts and finished modes after a crash; pending
events with the same fingerprint (or files_changed events from one source) merge into one row, and a
failure merges into the row of the same failure in flight (one cycle works on it, not two); an event
can be deferred (retried later: `not_before`); the number of pending events is bounded, evicting the
least important and never a failure.

One class over one table. Its paths, retries and schema are their own modules (queue_paths,
queue_retries, queue_schema), the file and its connection the store base's (autod.stores.sqlite); what
is left (admission with merging and eviction, lease, ack, recovery) shares one transaction discipline.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from autod.events import FAILURE_KINDS, PRIORITY, Event, EventKind
from autod.stores.queue_paths import (
    MAX_PATHS as MAX_PATHS,  # re-exported: importers of autod.stores.queue use it
)
from autod.stores.queue_paths import PathUnion
from autod.stores.queue_paths import paths_fingerprint as paths_fingerprint  # re-exported, as MAX_PATHS
from autod.stores.queue_retries import Deferrals
from autod.stores.queue_schema import SCHEMA
from autod.stores.queue_schema import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported, as MAX_PATHS
from autod.stores.queue_schema import QueueSchemaError as QueueSchemaError  # re-exported, as MAX_PATHS

log = structlog.get_logger(__name__)

BUSY_TIMEOUT_S = 10.0

_COLUMNS = (
    "seq, id, source, kind, summary, payload, fingerprint, created_at, merged, attempts, done_modes,"
    " retries, deferred_at"
)
_LEASE_ORDER = "ORDER BY priority, created_ts, seq"


@dataclass
class PutResult:
    accepted: bool
    id: str  # the id that now carries the event (the existing one if merged)
    merged: bool = False
    dropped_id: str | None = None  # an older, lower-priority event evicted to make room


@dataclass
class Leased:
    event: Event  # .merged = how many events merged into it
    attempts: int  # times this event was handed out (>1 after a crash mid-cycle)
    done_modes: list[str] = field(default_factory=list)  # modes whose cycle already completed
    retries: int = 0  # times it was deferred to be tried again (autod.runtime.retry)
    deferred_at: float | None = None  # when it was last deferred: cycles before that do not count as done


def _row_event(row: sqlite3.Row) -> Event:
    return Event(
        id=row["id"],
        source=row["source"],
        kind=EventKind(row["kind"]),
        summary=row["summary"],
        payload=json.loads(row["payload"]),
        fingerprint=row["fingerprint"],
        created_at=datetime.fromisoformat(row["created_at"]),
        merged=row["merged"],
    )


class EventQueue(Deferrals):
    """The durable queue. Sync methods for tests and the CLI; `a*` wrappers for the daemon's event loop.
    Deferred events (retries) are handled by `autod.stores.queue_retries.Deferrals`."""

    def __init__(self, path: Path, *, max_pending: int = 10_000) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.max_pending = max_pending
        super().__init__(
            path, SCHEMA, busy_timeout_s=BUSY_TIMEOUT_S, rows=True, worker="autod-queue", name="queue"
        )

    # -- put -------------------------------------------------------------------------------------

    def put(self, event: Event) -> PutResult:
        """Accept one event (merged, coalesced or inserted); durable when this returns."""
        return self.put_many([event])[0]

    def put_many(self, events: Sequence[Event]) -> list[PutResult]:
        """Accept many events in one transaction (one fsync for a storm)."""
        unions: dict[int, PathUnion] = {}
        with self._write() as db:
            results = [self._put(db, event, unions) for event in events]
            for union in unions.values():
                union.flush(db)
        return results

    def _put(self, db: sqlite3.Connection, event: Event, unions: dict[int, PathUnion]) -> PutResult:
        target = None
        same_fp = db.execute(
            "SELECT * FROM events WHERE fingerprint = ? AND status = 'pending' ORDER BY seq",
            (event.fingerprint,),
        ).fetchall()
        for row in same_fp:
            grown = unions.get(row["seq"])
            # A row whose paths grew earlier in this batch still carries its old fingerprint on disk.
            if grown is None or grown.fingerprint() == event.fingerprint:
                target = row
                break
        if target is None and event.kind in FAILURE_KINDS:
            # The same failure is being worked on: one cycle for both. Planned after that cycle's fix, the
            # duplicate would be stale news (its row comes back only if the cycle did not resolve it).
            target = db.execute(
                "SELECT * FROM events WHERE fingerprint = ? AND status = 'in_flight' ORDER BY seq LIMIT 1",
                (event.fingerprint,),
            ).fetchone()
        if target is None and event.kind == EventKind.FILES_CHANGED:
            target = db.execute(
                "SELECT * FROM events WHERE source = ? AND kind = ? AND status = 'pending'"
                " ORDER BY seq LIMIT 1",
                (event.source, EventKind.FILES_CHANGED.value),
            ).fetchone()
        if target is None and unions:
            # A new row is due: only now is it worth hashing the rows grown in this batch (one may now carry
            # this fingerprint), so a batch ends where one put per event would.
            grown_match = [seq for seq, u in sorted(unions.items()) if u.fingerprint() == event.fingerprint]
            if grown_match:
                target = db.execute("SELECT * FROM events WHERE seq = ?", (grown_match[0],)).fetchone()
        if target is not None:
            if target["kind"] == EventKind.FILES_CHANGED and event.kind == EventKind.FILES_CHANGED:
                if target["seq"] not in unions:
                    unions[target["seq"]] = PathUnion.of_row(target)
                unions[target["seq"]].fold(event)
            else:
                if target["seq"] in unions:  # a rare cross-kind merge: write the union first, then merge
                    unions.pop(target["seq"]).flush(db)
                    target = db.execute("SELECT * FROM events WHERE seq = ?", (target["seq"],)).fetchone()
                self._merge(db, target, event)
            return PutResult(accepted=True, id=target["id"], merged=True)

        dropped_id: str | None = None
        if self._count(db, "n_pending") >= self.max_pending:
            victim = self._eviction_candidate(db)
            if victim is None:
                log.warning(
                    "queue.over_bound",
                    event_id=event.id, kind=event.kind.value, max_pending=self.max_pending,
                )
            elif event.kind not in FAILURE_KINDS and victim["priority"] < event.priority:
                # The newcomer is the least important event of all: it is the one not taken.
                log.warning(
                    "queue.event_evicted", dropped_id=event.id, kind=event.kind.value,
                    fingerprint=event.fingerprint, max_pending=self.max_pending,
                )
                self._bump(db, "dropped_total", 1)
                return PutResult(accepted=False, id=event.id)
            else:
                dropped_id = victim["id"]
                db.execute("DELETE FROM events WHERE seq = ?", (victim["seq"],))
                if (gone := unions.pop(victim["seq"], None)) is not None:
                    self._bump(db, "merged_total", gone.merged)
                self._bump(db, "dropped_total", 1)
                log.warning(
                    "queue.event_evicted", dropped_id=dropped_id, kind=victim["kind"],
                    fingerprint=victim["fingerprint"], max_pending=self.max_pending,
                )
        self._insert(db, event)
        return PutResult(accepted=True, id=event.id, dropped_id=dropped_id)

    def _merge(self, db: sqlite3.Connection, row: sqlite3.Row, event: Event) -> None:
        """Fold `event` into a pending row of its fingerprint: newest summary/payload, first created_at."""
        payload = event.model_dump(mode="json")["payload"]
        # The more urgent kind wins, so the row's priority stays the min of both.
        kind = row["kind"] if row["priority"] <= event.priority else event.kind.value
        db.execute(
            "UPDATE events SET summary = ?, payload = ?, kind = ?, priority = ?, merged = merged + ?"
            " WHERE seq = ?",
            (event.summary, json.dumps(payload), kind, PRIORITY[EventKind(kind)], event.merged, row["seq"]),
        )
        if row["status"] == "pending" and event.kind in FAILURE_KINDS:
            # News after the row's cycles (a failure back after a restart that came between a cycle's end
            # and its event's ack): no cycle so far handled it, so every mode takes it again.
            db.execute("UPDATE events SET done_modes = '[]', deferred_at = ? WHERE seq = ?",
                       (time.time(), row["seq"]))
        self._bump(db, "merged_total", event.merged)

    def _insert(self, db: sqlite3.Connection, event: Event) -> None:
        data = event.model_dump(mode="json")
        db.execute(
            "INSERT INTO events (id, source, kind, summary, payload, fingerprint, created_at, created_ts,"
            " priority, merged, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
            (
                event.id, event.source, event.kind.value, event.summary, json.dumps(data["payload"]),
                event.fingerprint, event.created_at.isoformat(), event.created_at.timestamp(),
                event.priority, event.merged,
            ),
        )

    @staticmethod
    def _eviction_candidate(db: sqlite3.Connection) -> sqlite3.Row | None:
        """Oldest pending event of the lowest priority, failures excluded (two index lookups, no sort)."""
        failures = tuple(k.value for k in FAILURE_KINDS)
        marks = ", ".join("?" * len(failures))
        worst = db.execute(
            f"SELECT MAX(priority) FROM events WHERE status = 'pending' AND kind NOT IN ({marks})", failures
        ).fetchone()[0]
        if worst is None:
            return None
        return db.execute(
            f"SELECT * FROM events WHERE status = 'pending' AND priority = ? AND kind NOT IN ({marks})"
            " ORDER BY created_ts, seq LIMIT 1",
            (worst, *failures),
        ).fetchone()

    @staticmethod
    def _count(db: sqlite3.Connection, name: str) -> int:
        return int(db.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()[0])

    @staticmethod
    def _bump(db: sqlite3.Connection, name: str, by: int) -> None:
        db.execute("UPDATE counters SET value = value + ? WHERE name = ?", (by, name))

    # -- hand-off ----------------------------------------------------------------------------------

    def lease(self, *, kinds: Collection[str] | None = None, now: float | None = None) -> Leased | None:
        """Hand out the most urgent, then oldest, pending event that is due (of `kinds` if given); mark it
        in_flight. A deferred event is due once its `not_before` has passed."""
        now = time.time() if now is None else now
        where, args = "status = 'pending' AND (not_before IS NULL OR not_before <= ?)", [now]
        if kinds is not None:
            if not kinds:
                return None
            where += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += [str(k) for k in kinds]
        with self._write() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM events WHERE {where} {_LEASE_ORDER} LIMIT 1",
                args,
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE events SET status = 'in_flight', attempts = attempts + 1, leased_at = ?"
                " WHERE seq = ?",
                (time.time(), row["seq"]),
            )
        done = json.loads(row["done_modes"])
        return Leased(
            event=_row_event(row),
            attempts=row["attempts"] + 1,
            done_modes=done,
            retries=row["retries"],
            deferred_at=row["deferred_at"],
        )

    def mark_done(self, event_id: str, mode: str) -> None:
        """Record durably that `mode`'s cycle finished for this event (skipped if it comes back)."""
        with self._write() as db:
            row = db.execute("SELECT done_modes FROM events WHERE id = ?", (event_id,)).fetchone()
            if row is None:
                log.warning("queue.mark_done_unknown_event", event_id=event_id, mode=mode)
                return
            done = json.loads(row["done_modes"])
            if mode not in done:
                done.append(mode)
                db.execute("UPDATE events SET done_modes = ? WHERE id = ?", (json.dumps(done), event_id))

    def ack(self, event_id: str) -> None:
        """The event is finished: removed for good (idempotent)."""
        with self._write() as db:
            deleted = db.execute("DELETE FROM events WHERE id = ?", (event_id,)).rowcount
        if not deleted:
            log.debug("queue.ack_unknown_event", event_id=event_id)

    def release(self, event_id: str) -> None:
        """Put an in_flight event back to pending (its cycle never started); attempts are kept."""
        with self._write() as db:
            db.execute(
                "UPDATE events SET status = 'pending', leased_at = NULL"
                " WHERE id = ? AND status = 'in_flight'",
                (event_id,),
            )

    def recover(self) -> int:
        """At start-up: every in_flight event (its cycle died with the process) goes back to pending."""
        with self._write() as db:
            count = db.execute(
                "UPDATE events SET status = 'pending', leased_at = NULL WHERE status = 'in_flight'"
            ).rowcount
        if count:
            log.info("queue.recovered_in_flight", count=count)
        return count

    # -- inspection --------------------------------------------------------------------------------

    def depth(self) -> int:
        """Pending + in_flight events."""
        with self._read() as db:
            return self._count(db, "n_pending") + self._count(db, "n_in_flight")

    def stats(self) -> dict[str, Any]:
        """Pending per kind, in_flight, merged_total, dropped_total, oldest_age_s (None when empty)."""
        with self._read() as db:
            db.execute("BEGIN")  # one snapshot for all figures
            try:
                per_kind = dict(
                    db.execute(
                        "SELECT kind, COUNT(*) FROM events WHERE status = 'pending' GROUP BY kind"
                    ).fetchall()
                )
                counters = dict(db.execute("SELECT name, value FROM counters").fetchall())
                oldest = db.execute("SELECT MIN(created_ts) FROM events").fetchone()[0]
                deferred = db.execute(
                    "SELECT COUNT(*) FROM events WHERE status = 'pending' AND not_before > ?", (time.time(),)
                ).fetchone()[0]
            finally:
                db.execute("COMMIT")
        return {
            "pending": {k.value: per_kind.get(k.value, 0) for k in EventKind},
            "pending_total": counters["n_pending"],
            "in_flight": counters["n_in_flight"],
            "merged_total": counters["merged_total"],
            "dropped_total": counters["dropped_total"],
            "deferred": deferred,
            "oldest_age_s": None if oldest is None else max(0.0, round(time.time() - oldest, 3)),
        }

    def pending(self, limit: int = 50) -> list[Event]:
        """Pending events in the order they would be leased."""
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM events WHERE status = 'pending' {_LEASE_ORDER} LIMIT ?",
                (limit,),
            ).fetchall()
        return [_row_event(r) for r in rows]

    # -- async wrappers: sqlite fsyncs run on the store's worker thread, never on the event loop --

    async def aput(self, event: Event) -> PutResult:
        return await self.call(self.put, event)

    async def alease(self, *, kinds: Collection[str] | None = None) -> Leased | None:
        return await self.call(self.lease, kinds=kinds)

    async def amark_done(self, event_id: str, mode: str) -> None:
        await self.call(self.mark_done, event_id, mode)

    async def aack(self, event_id: str) -> None:
        await self.call(self.ack, event_id)

    async def arelease(self, event_id: str) -> None:
        await self.call(self.release, event_id)

    async def apending(self, limit: int = 1000) -> list[Event]:
        return await self.call(self.pending, limit)

    async def adepth(self) -> int:
        return await self.call(self.depth)

    async def astats(self) -> dict[str, Any]:
        return await self.call(self.stats)
