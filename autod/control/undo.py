"""`autod undo CYCLE [--reason TEXT]` in the daemon: under the workspace lock (after a cycle in flight),
take back what the cycle kept (the working tree, its commit, or its branch or patch), then record it as
a rejection is recorded: a reflection record (`status: undone`), a lesson in memory, and an attempt on
the failure's fingerprint whose note the next plan for that failure sees."""

from __future__ import annotations

import asyncio
import re
import subprocess
import uuid
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from autod import logs
from autod.cycle.reflect import log_reflection
from autod.errors import PlanRejected
from autod.events import Event, EventKind
from autod.reflection import Reflection
from autod.undo.ledger import KeptLedger
from autod.undo.revert import UndoRefused, commit_revert, revert

if TYPE_CHECKING:
    from autod.memory import Memory
    from autod.metrics.registry import Metrics
    from autod.runtime.wiring import Wiring
    from autod.stores.state import State
    from autod.webhooks.courier import Courier

log = structlog.get_logger("autod.undo")

_CYCLE = re.compile(r"^[0-9a-f]{4,64}$")
KEPT_STATUSES = ("fixed", "improved")


class UndoHost(Protocol):
    """What `undo` needs from the running daemon."""

    @property
    def wiring(self) -> Wiring:
        """The wiring in force: its settings, its delivery, its gate (the attempt the undo counts)."""
        ...

    state: State
    memory: Memory | None
    workspace_lock: asyncio.Lock
    kept: KeptLedger
    metrics: Metrics | None
    courier: Courier | None


async def undo(host: UndoHost, cycle_id: str, reason: str | None) -> dict[str, Any]:
    """Undo one kept cycle; {"ok": False, "error": ...} names what stopped it (nothing written then)."""
    why = (reason or "no reason given").strip()[:500] or "no reason given"
    if not _CYCLE.match(cycle_id or ""):
        return {"ok": False, "error": "name a cycle by its id (or a unique prefix of at least 4 hex digits)"}
    undo_id = uuid.uuid4().hex[:12]
    async with host.workspace_lock:
        out = await _undo_locked(host, host.wiring, cycle_id, undo_id, why)
    outcome = "undone" if out.get("ok") else "refused"
    if host.metrics is not None:
        host.metrics.undos.labels(outcome).inc()
    return out


async def _undo_locked(host: UndoHost, w: Wiring, cycle_id: str, undo_id: str, why: str) -> dict[str, Any]:
    s, state = w.settings, host.state
    rows = await state.call(state.cycle_record, cycle_id)
    exact = [r for r in rows if r["id"] == cycle_id]
    row = exact[0] if exact else (rows[0] if len(rows) == 1 else None)
    if row is None:
        return {"ok": False, "error": f"no cycle {cycle_id} (or the prefix is ambiguous): see autod history"}
    cid = row["id"]
    if row["status"] not in KEPT_STATUSES:
        return {
            "ok": False,
            "error": f"cycle {cid} ended {row['status'] or 'running'}: it kept nothing to undo",
        }
    kept = await asyncio.to_thread(host.kept.load, cid)
    delivered: dict[str, Any] | None = None
    edits: list[dict[str, object]] = []
    commit = None
    if kept is not None:
        if kept.undone_by:
            return {"ok": False, "error": f"cycle {cid} was already undone (by {kept.undone_by})"}
        try:
            done = await asyncio.to_thread(revert, s.state_path, s.workspace, kept, undo_id)
        except (UndoRefused, PlanRejected) as exc:
            files = exc.files if isinstance(exc, UndoRefused) else []
            log.warning("undo.refused", undone_cycle=cid, reason=exc.reason, files=files)
            return {"ok": False, "error": exc.reason, "files": files}
        edits = done.edits
        if kept.commit and s.git.commit:
            try:
                result = await asyncio.to_thread(commit_revert, s.workspace, kept, done, undo_id, why)
            except (OSError, subprocess.TimeoutExpired) as exc:
                result = {"committed": None, "reason": f"git did not run ({type(exc).__name__})"}
            commit = result.get("committed")
            if commit:
                log.info("git.committed", commit=commit, files=done.restored + done.removed, undo_of=cid)
            else:
                log.warning("git.not_committed", reason=result.get("reason"), files=result.get("skipped"))
        await asyncio.to_thread(host.kept.mark_undone, kept, undo_id, why)
    else:
        delivered = await asyncio.to_thread(w.delivery.undo, cid, undo_id, why)
        if delivered is not None and not delivered.get("ok"):
            log.warning("undo.refused", undone_cycle=cid, reason=delivered.get("error"))
            return {"ok": False, "error": delivered.get("error")}
        if delivered is not None:
            commit = delivered.get("commit")
            edits = [{"path": p, "added": 0, "removed": 0} for p in delivered.get("files", [])]
    if kept is None and delivered is None:
        return {
            "ok": False,
            "error": f"no record of what cycle {cid} wrote (autod keeps the last"
            f" undo.keep_cycles={s.undo.keep_cycles} kept cycles, for undo.keep_days={s.undo.keep_days:g})",
        }
    r = await _record(host, w, row, undo_id, why, edits, commit, delivered)
    return {
        "ok": True,
        "cycle_id": cid,
        "undo_id": undo_id,
        "edits": edits,
        "commit": commit,
        "delivery": delivered,
        "lesson": r.lesson,
    }


async def _record(
    host: UndoHost,
    w: Wiring,
    row: dict[str, Any],
    undo_id: str,
    why: str,
    edits: list[dict[str, object]],
    commit: str | None,
    delivered: dict[str, Any] | None,
) -> Reflection:
    """The undo as a cycle of its own, and what memory and the fingerprint learn from it."""
    state, cid, rec = host.state, row["id"], row.get("record") or {}
    plan = str(rec.get("plan_summary") or "")
    r = Reflection(
        cycle_id=undo_id,
        event_id=row["event_id"],
        mode=row["mode"],
        fingerprint=row["fingerprint"],
        kind=row["kind"],
        summary=f"undo of cycle {cid}: {row['summary']}"[:500],
        status="undone",
        reason=f"the operator undid cycle {cid}: {why}",
        plan_summary=f"undo cycle {cid} ({plan[:200]})",
        edits=edits,
        commit=commit,
        planner="operator",
        delivery=delivered,
    )
    r.lesson = (
        f"[{row['mode']}] The operator undid the fix '{plan[:200]}' for '{str(row['summary'])[:200]}'"
        f" after it was kept (cycle {cid}). Reason: {why}. Do not propose this again."
    )
    await state.call(
        state.cycle_started, undo_id, row["event_id"], row["mode"], row["fingerprint"], row["kind"], r.summary
    )
    logs.bind_cycle(undo_id, row["event_id"], row["mode"])
    try:
        logs.set_phase("reflect")
        log.info("undo.done", undone_cycle=cid, files=[e["path"] for e in edits], commit=commit)
        log_reflection(r)
    finally:
        logs.clear_cycle()
    await state.call(state.cycle_finished, undo_id, "undone", r.reason, r.record())
    try:  # the next plan for this failure sees it as a failed attempt ("Earlier attempts")
        event = Event(
            id=row["event_id"],
            source="undo",
            kind=EventKind(row["kind"]),
            summary=row["summary"],
            fingerprint=row["fingerprint"],
        )
        attempt = {"summary": plan, "diff": "", "output": f"undone by the operator after it was kept: {why}"}
        await state.call(w.gate.record_attempt, event, "undone", attempt)
    except (ValueError, TypeError) as exc:
        log.debug("undo.attempt_not_recorded", error=type(exc).__name__)
    if host.memory is not None:
        try:
            meta = {
                "fingerprint": row["fingerprint"],
                "mode": row["mode"],
                "status": "undone",
                "kind": row["kind"],
                "cycle_id": undo_id,
            }
            await host.memory.add_lesson(logs.redact_text(r.lesson), meta, success=False)
        except Exception as exc:  # memory trouble never undoes an undo
            log.warning("memory.write_failed", error=type(exc).__name__)
    if host.courier is not None:
        from autod.webhooks.payload import from_undo

        await host.courier.announce(from_undo(r.record(), cid))
    return r
