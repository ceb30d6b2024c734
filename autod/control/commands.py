"""What the control socket can ask the running daemon, and the status snapshot shared with the CLI.

The daemon is seen through the small `DaemonView` protocol (what these commands read and call), so
this module does not import the supervisor that serves it.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from autod.checks import sandbox
from autod.events import Event, EventKind, fingerprint
from autod.memory import Tier
from autod.memory.report import hits_to_json
from autod.memory.resilient import MemoryUnavailable, ResilientMemory
from autod.plan import Plan
from autod.planner import ServerPlanner
from autod.runtime.checkbook import CheckBook
from autod.runtime.dispatch import Dispatcher
from autod.runtime.notify import Notifier
from autod.runtime.sourceset import SourceSet
from autod.runtime.waiting import retry_now, start_waiting, waiting_rows
from autod.runtime.wiring import Wiring
from autod.stores.queue import EventQueue
from autod.stores.state import State
from autod.undo.ledger import KeptLedger

if TYPE_CHECKING:
    from autod.metrics.registry import Metrics
    from autod.metrics.server import MetricsServer
    from autod.webhooks.courier import Courier

log = structlog.get_logger("autod.control.commands")


class DaemonView(Protocol):
    """What the control commands need from the running daemon: what the config decides is its wiring
    (settings, modes, gate, planner, breaker, delivery), the rest lives as long as the daemon."""

    @property
    def wiring(self) -> Wiring:
        """The wiring in force (a reload replaces it whole)."""
        ...

    state: State
    queue: EventQueue
    memory: ResilientMemory | None
    dispatcher: Dispatcher
    notifier: Notifier
    book: CheckBook
    sources: SourceSet
    kept: KeptLedger
    paused: bool
    started_at: float
    wakeup: asyncio.Event
    workspace_lock: asyncio.Lock
    metrics: Metrics
    metrics_server: MetricsServer
    courier: Courier

    async def accept(self, event: Event) -> None: ...

    async def probe_check(self, name: str) -> None: ...

MODES = ("auto-debug", "auto-doc", "auto-plan")


def manual_event(mode: str, path: str | None, message: str | None) -> Event:
    """The event `autod trigger MODE` queues."""
    return Event(
        source="manual",
        kind=EventKind.MANUAL,
        summary=f"manual trigger of {mode}"
        + (f" on {path}" if path else "")
        + (f": {message}" if message else ""),
        payload={"mode": mode, "paths": [path] if path else [], "message": message or ""},
        # each trigger is its own event: the unique part is hashed as it is (normalising would erase it)
        fingerprint=fingerprint("manual", mode, path or "", message or "", exact=[uuid.uuid4().hex]),
    )


def offline_status(state: State, queue: EventQueue) -> dict[str, Any]:
    """What can be read from the state dir alone (the daemon is down, or as part of its status)."""
    return {
        "queue": {"depth": queue.depth(), **queue.stats(), "retries": waiting_rows(queue)},
        "proposals": [_proposal_row(p) for p in _live(state.proposals("pending"))],
        "quarantined": state.quarantined(),
        "last_cycles": state.history(10),
    }


def _takes(wiring: Wiring, name: str) -> Callable[[Event], bool]:
    """Whether the mode `name` takes an event (`autod trigger` starts such a waiting one)."""
    mode = wiring.mode(name)
    return mode.handles if mode is not None else (lambda _event: False)


def quarantine_clear(state: State, fp: str | None, everything: bool) -> dict[str, Any]:
    """`autod quarantine clear FP|--all`, on the state db (the daemon's, or directly when it is down)."""
    if everything:
        cleared = state.release_all_quarantine()
    elif fp:
        cleared = state.release_quarantine(fp)
        if not cleared:
            return {"ok": False, "error": f"no quarantined fingerprint {fp} (or the prefix is ambiguous)"}
    else:
        return {"ok": False, "error": "name a fingerprint, or --all"}
    return {"ok": True, "cleared": cleared}


def _live(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pending proposals past their TTL are not offered (housekeeping marks them expired within a minute)."""
    now = time.time()
    return [p for p in rows if p["status"] != "pending" or p["expires_at"] > now]


def _proposal_row(p: dict[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k in ("id", "cycle_id", "mode", "created_at", "expires_at", "status", "diff")} | {
        "summary": Plan.model_validate_json(p["plan"]).summary,
        "event": Event.model_validate_json(p["event"]).summary,
    }


class Commands:
    def __init__(self, daemon: DaemonView) -> None:
        self.d = daemon
        self._rechecks: set[asyncio.Task[None]] = set()  # held until done (the loop keeps weak refs)

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        cmd = req["cmd"]
        fn = getattr(self, f"cmd_{cmd}", None)
        if fn is None:
            return {"ok": False, "error": f"unknown command {cmd!r}"}
        return await fn(req)

    async def cmd_status(self, req: dict[str, Any]) -> dict[str, Any]:
        with self.d.dispatcher.holding() as w:  # one config throughout; its planner open for the ping
            return await self._status(req, w)

    async def _status(self, req: dict[str, Any], w: Wiring) -> dict[str, Any]:
        d, cfg = self.d, w.settings
        snap = await d.state.call(offline_status, d.state, d.queue)
        # one due time per waiting event: its own, or later when a limit holds every cycle
        snap["queue"]["retries"] = await asyncio.to_thread(waiting_rows, d.queue, d.dispatcher.hold)
        counters = await d.state.call(w.gate.counters)
        llm: dict[str, Any] = {"configured": bool(cfg.llm.base_url), "planner": w.planner_name}
        if cfg.llm.base_url:
            server = w.planner if isinstance(w.planner, ServerPlanner) else None
            llm["endpoint"] = server.endpoint if server is not None else cfg.llm.base_url
            llm["circuit"] = w.breaker.snapshot() if w.breaker else None
            if req.get("ping"):
                llm["reachable"] = await server.ping() if server is not None else None
        current = None
        running = d.dispatcher.current
        if running is not None:
            current = {"cycle_id": running.r.cycle_id, "mode": running.r.mode, "summary": running.r.summary,
                       "phase": running.phase_now}
            if running.drawing is not None:  # its draws: done and planned, model time, an estimate
                current["draws"] = running.drawing.progress().as_dict()
        errors = d.book.errors()
        return {
            "ok": True,
            "running": True,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - d.started_at, 1),
            "paused": d.paused,
            "waiting": d.dispatcher.waiting_reason or None,
            "current_cycle": current,
            "modes": [m.name for m in w.modes],
            "wedged": d.dispatcher.progress.wedged(),
            "config_file": str(cfg.config_file) if cfg.config_file else None,
            "state_dir": str(cfg.state_path),
            "config_problems": list(w.config_problems),
            "sources": [
                {**{k: v for k, v in asdict(s).items() if k != "crashes"}, "armed": d.sources.armed(s.name)}
                for s in d.sources.states.values()
            ],
            "checks": {
                n: {"exit_code": r.exit_code, "ok": r.ok, "error": errors.get(n), "changed": r.changed[:50],
                    "outputs": r.outputs[:50]}
                for n, r in d.book.results.items()
            },
            "counters": counters,
            "llm": llm,
            "memory": d.memory.summary() if d.memory is not None else "off",
            "memory_status": d.memory.status() if d.memory is not None else None,
            "sandbox": await asyncio.to_thread(sandbox.status, cfg),
            "metrics": d.metrics_server.status(),
            "webhooks": await d.courier.status(),
            "delivery": await w.delivery.status(),
            **snap,
        }

    async def cmd_pause(self, req: dict[str, Any]) -> dict[str, Any]:
        self.d.paused = True
        await self.d.state.call(self.d.state.set_kv, "paused", True)
        log.info("control.paused")
        self.d.notifier.status("paused")
        return {"ok": True, "paused": True}

    async def cmd_resume(self, req: dict[str, Any]) -> dict[str, Any]:
        self.d.paused = False
        await self.d.state.call(self.d.state.set_kv, "paused", False)
        log.info("control.resumed")
        self.d.wakeup.set()
        return {"ok": True, "paused": False}

    async def cmd_trigger(self, req: dict[str, Any]) -> dict[str, Any]:
        mode = req.get("mode")
        if mode not in MODES:
            return {"ok": False, "error": f"unknown mode {mode!r}; one of {', '.join(MODES)}"}
        wiring = self.d.wiring
        if wiring.mode(mode) is None:
            return {"ok": False, "error": f"mode {mode} is not enabled in the config"}
        if not req.get("path") and not req.get("message"):  # the mode's waiting event runs, not a second
            started = await asyncio.to_thread(start_waiting, self.d.queue, _takes(wiring, mode))
            if started:
                return await self._now(started, "trigger")
        event = manual_event(mode, req.get("path"), req.get("message"))
        await self.d.accept(event)
        return {"ok": True, "event_id": event.id}

    async def cmd_retry(self, req: dict[str, Any]) -> dict[str, Any]:
        resp = await asyncio.to_thread(retry_now, self.d.queue, req.get("event"), bool(req.get("all")))
        if not resp.get("ok") or not resp["due"]:
            return resp
        return await self._now(resp["due"], "retry")

    async def _now(self, due: list[dict[str, Any]], by: str) -> dict[str, Any]:
        """Waiting events made due by the operator: the breaker lets one cycle try, the dispatcher wakes."""
        breaker = self.d.wiring.breaker
        if breaker is not None:
            breaker.half_open()
        log.info("control.retries_due_now", by=by, events=[r["id"] for r in due])
        self.d.wakeup.set()
        return {"ok": True, "due": due}

    async def cmd_proposals(self, req: dict[str, Any]) -> dict[str, Any]:
        rows = await self.d.state.call(self.d.state.proposals, req.get("status", "pending"))
        return {"ok": True, "proposals": [_proposal_row(p) for p in _live(rows)]}

    async def cmd_approve(self, req: dict[str, Any]) -> dict[str, Any]:
        with self.d.dispatcher.holding() as w:  # the cycle runs on the config the mode was found in
            return await self._approve(req, w)

    async def _approve(self, req: dict[str, Any], w: Wiring) -> dict[str, Any]:
        d = self.d
        p = await d.state.call(d.state.proposal, str(req.get("id", "")))
        if p is None:
            return {"ok": False, "error": "no such proposal (or the id prefix is ambiguous)"}
        if p["status"] != "pending":
            return {"ok": False, "error": f"proposal {p['id']} is {p['status']}, not pending"}
        if p["expires_at"] <= time.time():
            await d.state.call(d.state.decide_proposal, p["id"], "expired", "not approved in time")
            return {"ok": False, "error": f"proposal {p['id']} expired"}
        mode = w.mode(p["mode"])
        if mode is None:
            return {"ok": False, "error": f"mode {p['mode']} is no longer enabled"}
        event = Event.model_validate_json(p["event"])
        plan = Plan.model_validate_json(p["plan"])
        # One pending -> approved transition: of concurrent approves (or an approve racing a reject)
        # exactly one goes on; the status read above was only for the error message.
        if not await d.state.call(d.state.claim_proposal, p["id"], "approved", req.get("reason")):
            return {"ok": False, "error": f"proposal {p['id']} is no longer pending (decided meanwhile)"}
        cycle = await d.dispatcher.run_cycle(w, mode, event, approved=plan, slot=f"approve:{p['id']}")
        r = cycle.r
        final = "applied" if r.status in ("fixed", "improved") else "failed"
        await d.state.call(
            d.state.decide_proposal, p["id"], final, f"cycle {r.cycle_id} {r.status}" + (
                f": {r.reason}" if r.reason else ""
            ),
        )
        return {
            "ok": r.status in ("fixed", "improved"),
            "proposal": p["id"],
            "cycle_id": r.cycle_id,
            "status": r.status,
            "reason": r.reason,
            "edits": r.edits,
            "checks": r.checks,
        }

    async def cmd_reject(self, req: dict[str, Any]) -> dict[str, Any]:
        d = self.d
        p = await d.state.call(d.state.proposal, str(req.get("id", "")))
        if p is None or p["status"] != "pending":
            return {"ok": False, "error": "no such pending proposal"}
        reason = str(req.get("reason") or "no reason given")[:500]
        if not await d.state.call(d.state.claim_proposal, p["id"], "rejected", reason):
            return {"ok": False, "error": f"proposal {p['id']} is no longer pending (decided meanwhile)"}
        plan = Plan.model_validate_json(p["plan"])
        event = Event.model_validate_json(p["event"])
        lesson = (
            f"[{p['mode']}] The operator rejected the plan '{plan.summary[:200]}' for "
            f"'{event.summary[:200]}'. Reason: {reason}. Do not propose this again."
        )
        if d.memory is not None:
            await d.memory.add_lesson(
                lesson,
                {
                    "fingerprint": event.fingerprint,
                    "mode": p["mode"],
                    "status": "rejected",
                    "kind": str(event.kind),
                },
                success=False,
            )
        log.info("proposal.rejected", proposal_id=p["id"], reason=reason)
        return {"ok": True, "proposal": p["id"], "lesson": lesson}

    def _memory(self) -> ResilientMemory:
        if self.d.memory is None:  # only before start-up opened it
            raise MemoryUnavailable("memory is not open yet")
        return self.d.memory

    async def cmd_quarantine(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "quarantined": await self.d.state.call(self.d.state.quarantined)}

    async def cmd_quarantine_clear(self, req: dict[str, Any]) -> dict[str, Any]:
        fp = req.get("fingerprint")
        rows = await self.d.state.call(self.d.state.quarantined)
        held = {r["fingerprint"]: r.get("check_name") for r in rows}
        resp = await self.d.state.call(
            quarantine_clear, self.d.state, str(fp) if fp else None, bool(req.get("all"))
        )
        for one in resp.get("cleared") or []:
            log.info("quarantine.cleared", fingerprint=one, by="operator")
        # the failure is worked on again now, not at the next save: its check runs, a failure is queued
        cleared = resp.get("cleared") or []
        checks = sorted({c for f in cleared if (c := held.get(f)) in self.d.wiring.settings.checks})
        for name in checks:
            task = asyncio.create_task(self.d.probe_check(name), name=f"recheck-{name}")
            self._rechecks.add(task)
            task.add_done_callback(self._rechecks.discard)
        if checks:
            resp["rechecking"] = checks
        return resp

    async def cmd_memory_stats(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"ok": True, "stats": await self._memory().stats()}
        except MemoryUnavailable as exc:
            return {"ok": False, "error": str(exc)}

    async def cmd_memory_search(self, req: dict[str, Any]) -> dict[str, Any]:
        tier = Tier(req["tier"].lower()) if req.get("tier") else None
        try:
            hits = await self._memory().search(str(req.get("query", "")), tier=tier, k=int(req.get("k", 10)))
        except MemoryUnavailable as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "hits": hits_to_json(hits)}

    async def cmd_memory_prune(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            removed = await self._memory().prune(dry_run=bool(req.get("dry_run")))
        except MemoryUnavailable as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "removed": removed, "dry_run": bool(req.get("dry_run"))}

    async def cmd_metrics(self, req: dict[str, Any]) -> dict[str, Any]:
        """The Prometheus exposition, as a scrape of `metrics.listen` would get it."""
        from autod.metrics.sampler import sample_once

        await sample_once(self.d, self.d.metrics, [])  # `autod metrics` shows the gauges as of now
        return {"ok": True, "text": self.d.metrics.exposition().decode()}

    async def cmd_undo(self, req: dict[str, Any]) -> dict[str, Any]:
        from autod.control.undo import undo

        return await undo(self.d, str(req.get("cycle") or ""), req.get("reason"))
