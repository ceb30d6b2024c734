"""Events waiting for a retry, as the operator sees and moves them: one line each in `autod status`,
run now by `autod retry`, started by `autod trigger MODE` instead of a second event.

Each works on the queue db, so the daemon (over the control socket) and the CLI with the daemon down
(the change is stored for the next start, like `trigger` and `pause`) share them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autod.events import Event
from autod.stores.queue import EventQueue


@dataclass(frozen=True)
class Hold:
    """A limit that holds every cycle (the dispatcher's gate): why, and until when (wall clock)."""

    reason: str
    until: float


def waiting_rows(
    queue: EventQueue, hold: Hold | None = None, now: float | None = None
) -> list[dict[str, Any]]:
    """Deferred events for `status`: each with one due time (`due_at`, `due_in_s`: its own retry time,
    or later when a limit holds every cycle until then: `held`), its try count and why it waits."""
    now = time.time() if now is None else now
    out = []
    for row in queue.retrying():
        row.pop("payload", None)
        due = now if row["status"] == "in_flight" else max(now, row["not_before"] or now)
        held = None
        if hold is not None and hold.until > due and row["status"] == "pending":
            due, held = hold.until, hold.reason
        out.append(row | {"due_at": due, "due_in_s": round(due - now, 1), "held": held,
                          "waits_for": row.get("retry_kind") or "outside"})
    return out


def retry_now(queue: EventQueue, event: str | None, everything: bool) -> dict[str, Any]:
    """`autod retry EVENT|--all`: waiting retries become due now (their counts are kept)."""
    if everything:
        return {"ok": True, "due": [_brief(r) for r in queue.make_due()]}
    if not event:
        return {"ok": False, "error": "name a waiting event (a unique prefix of its id), or --all"}
    rows = queue.retrying(limit=10_000)
    named = [r["id"] for r in rows if r["status"] == "pending" and r["id"].startswith(event)]
    if len(named) > 1:
        return {"ok": False, "error": f"{event} names {len(named)} waiting events: give more of the id"}
    if not named:
        return {"ok": False, "error": f"no event {event} waits for a retry (autod status lists them)"}
    return {"ok": True, "due": [_brief(r) for r in queue.make_due(ids=named)]}


def start_waiting(queue: EventQueue, takes: Callable[[Event], bool]) -> list[dict[str, Any]]:
    """`autod trigger MODE` while events MODE takes wait for a retry: they are due now instead of a
    second event being queued. Returns those made due."""
    waiting = {e.id: e for e in queue.pending(limit=1000) if takes(e)}
    return [_brief(r) for r in queue.make_due(ids=list(waiting))] if waiting else []


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "kind": row["kind"], "summary": row["summary"], "retries": row["retries"]}
