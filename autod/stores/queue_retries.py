"""The queue's deferred events: tried again later (autod.runtime.retry), listed for `autod status`, made due
at once (the LLM answers again, `autod retry`, `autod trigger`), dropped when their news is stale.

A deferred event is a pending row with `not_before` (leasable from then), `retries` (times deferred),
`last_error` (why) and `retry_kind`, what it waits for:

- `outage`: the LLM could not be reached (`LLMUnavailable`); it is made due as soon as the LLM is
  seen answering again (autod.runtime.outage), not only after its backed-off delay;
- `outside`: another reason outside the repository (a spent budget): backoff only;
- `again`: a failure still failing after a cycle that could not fix it, attempted again later.

`EventQueue` is a `Deferrals`: the connection, its transactions and the worker thread are the store base's
(`autod.stores.sqlite`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from autod.stores.sqlite import SqliteStore

OUTAGE, OUTSIDE, AGAIN = "outage", "outside", "again"
RETRY_KINDS = (OUTAGE, OUTSIDE, AGAIN)

_WAITING = "status = 'pending' AND retries > 0"


class Deferrals(SqliteStore):
    """Deferred events in the queue db (the base of `autod.stores.queue.EventQueue`)."""

    def defer(
        self, event_id: str, delay_s: float, reason: str, *, kind: str = OUTSIDE, now: float | None = None
    ) -> int:
        """Put an in_flight event back to pending, leasable after `delay_s`; returns its retries so far."""
        now = time.time() if now is None else now
        with self._write() as db:
            db.execute(
                "UPDATE events SET status = 'pending', leased_at = NULL, not_before = ?,"
                " retries = retries + 1, last_error = ?, deferred_at = ?, retry_kind = ? WHERE id = ?",
                (now + max(0.0, delay_s), reason[:500], now, kind, event_id),
            )
            row = db.execute("SELECT retries FROM events WHERE id = ?", (event_id,)).fetchone()
        return int(row[0]) if row else 0

    def next_due(self, *, now: float | None = None) -> float | None:
        """Seconds until some pending event can be leased (0: now), or None when nothing is pending."""
        now = time.time() if now is None else now
        with self._read() as db:
            due = db.execute(
                "SELECT MIN(COALESCE(not_before, 0)) FROM events WHERE status = 'pending'"
            ).fetchone()[0]
        return None if due is None else max(0.0, due - now)

    def retrying(self, limit: int = 20) -> list[dict[str, Any]]:
        """Events that were deferred to be tried again (pending or back in flight), for `autod status`."""
        with self._read() as db:
            rows = db.execute(
                "SELECT id, kind, summary, fingerprint, status, retries, not_before, last_error, retry_kind,"
                " payload FROM events WHERE retries > 0 ORDER BY COALESCE(not_before, 0), seq LIMIT ?",
                (limit,),
            ).fetchall()
        return [dict(r) for r in rows]

    def waiting_on(self, kind: str) -> int:
        """How many pending events were deferred for a retry of this kind (due or not: a limit such as
        the circuit breaker may hold a due one)."""
        with self._read() as db:
            return int(db.execute(
                f"SELECT COUNT(*) FROM events WHERE {_WAITING} AND retry_kind = ?", (kind,)
            ).fetchone()[0])

    def make_due(
        self,
        *,
        ids: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
        now: float | None = None,
    ) -> list[dict[str, Any]]:
        """Waiting retries (all, those whose id starts with one of `ids`, or of `kinds`) become due now.
        Returns the rows made due (id, kind, summary, retries); their retry counts are kept."""
        now = time.time() if now is None else now
        where, args = _WAITING, []
        if kinds is not None:
            where += f" AND retry_kind IN ({', '.join('?' * len(kinds))})"
            args += list(kinds)
        with self._write() as db:
            rows = [dict(r) for r in db.execute(
                f"SELECT id, kind, summary, retries FROM events WHERE {where} ORDER BY seq", args
            ).fetchall()]
            if ids is not None:
                rows = [r for r in rows if any(r["id"].startswith(p) for p in ids if p)]
            for r in rows:
                db.execute("UPDATE events SET not_before = ? WHERE id = ?", (now, r["id"]))
        return rows

    def drop_pending(self, event_id: str) -> bool:
        """Remove a pending event (its news is stale); an event in flight is left to its cycle."""
        with self._write() as db:
            gone = db.execute("DELETE FROM events WHERE id = ? AND status = 'pending'", (event_id,))
            return gone.rowcount > 0

    # -- on the queue's worker thread, for the daemon's event loop --------------------------------
    async def adefer(self, event_id: str, delay_s: float, reason: str, *, kind: str = OUTSIDE) -> int:
        return await self.call(self.defer, event_id, delay_s, reason, kind=kind)

    async def anext_due(self) -> float | None:
        return await self.call(self.next_due)

    async def awaiting_on(self, kind: str) -> int:
        return await self.call(self.waiting_on, kind)

    async def amake_due(
        self, *, ids: Collection[str] | None = None, kinds: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        return await self.call(self.make_due, ids=ids, kinds=kinds)

    async def adrop_pending(self, event_id: str) -> bool:
        return await self.call(self.drop_pending, event_id)
