"""ACT: one plan under every act rule, then into the working tree (verified there, kept or rolled back), held
for a person (a proposal), or verified and delivered away from the tree (a branch or patch mode).

`prepare` is the act rules alone, nothing written (the candidate search filters its plans with it); `act`
takes a prepared plan and returns what became of it as a value, `Acted` or `Proposal`, and `record`
writes that value into the cycle's record. `act` reads the record (its id) and hands it to a delivery,
which adds where the fix went. `report` has a report-writing mode write a plan's report."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import structlog

from autod.act.describe import describe_fix, made_pass
from autod.act.edits import FileChange, unified_diff
from autod.act.edits import prepare as prepare_changes
from autod.act.journal import Journal
from autod.act.judges import requires_approval
from autod.cycle.deps import CycleDeps
from autod.cycle.proposal import store_proposal
from autod.errors import BudgetExhausted
from autod.events import Event
from autod.modes import Mode, ReportWriter, Verification, chain
from autod.modes.verifying import unjournaled
from autod.plan import Plan
from autod.reflection import Reflection
from autod.undo.remembered import undone_hold
from autod.verdict import KEPT, Status

log = structlog.get_logger("autod.cycle.phases")  # the act phase's lines, as they always were


@dataclass(frozen=True)
class Acting:
    """What the act phase is given: the cycle's parts, its mode and its event (never the cycle)."""

    deps: CycleDeps
    mode: Mode
    event: Event


@dataclass(frozen=True)
class Acted:
    """A plan verified: in the working tree (kept or rolled back there), or away from it by a delivery."""

    verification: Verification
    diff: str  # the plan's diff (the record's episode; what a re-plan is told)
    edits: list[dict[str, Any]] | None = None  # the files written; None: a delivery (it records its own)
    kept: tuple[FileChange, ...] = ()  # the changes kept in the tree
    rollback: dict[str, list[str]] | None = None  # what a rollback restored and left

    @property
    def left(self) -> list[str]:
        """Files its rollback left because someone else changed them after autod wrote them."""
        return list((self.rollback or {}).get("left") or [])


@dataclass(frozen=True)
class Proposal:
    """A plan held for `autod approve`: stored with its diff, nothing written."""

    id: str
    edits: list[dict[str, Any]]  # the files it would write
    why: str | None  # why it needs a person's yes; None: the mode confirms every plan


async def prepare(on: Acting, plan: Plan) -> tuple[list[FileChange], str]:
    """The plan's changes and their diff under the act rules, computed in a worker thread (never on the
    event loop); nothing written."""
    gate, env = on.deps.gate, on.deps.env
    caps = await env.state.call(gate.caps)
    if caps.max_edits <= 0:  # the day's budget, not the plan: the event waits (autod.runtime.retry)
        raise BudgetExhausted("max_edits_per_day reached")
    scope = chain(on.mode.scope(env))
    boundary = env.boundary
    stop = threading.Event()

    def work() -> tuple[list[FileChange], str]:
        changes = prepare_changes(plan, boundary, caps, scope=scope, stop=stop)
        return changes, unified_diff(changes)

    try:
        return await asyncio.to_thread(work)
    except asyncio.CancelledError:
        stop.set()  # the thread ends at its next check: a stop never waits for a huge plan
        raise


async def act(on: Acting, r: Reflection, plan: Plan, changes: list[FileChange], diff: str, *,
              hold: str = "", approved: bool = False) -> Acted | Proposal:
    """A prepared plan held for a person (a judge edit, an undone fix, `hold`, a mode that confirms every
    plan: unless `approved`), delivered away from the tree, or written into it under the journal."""
    settings, name = on.deps.env.settings, on.mode.name
    hold = hold or await asyncio.to_thread(undone_hold, settings.state_path, diff)
    judged = requires_approval(settings, name, changes)  # allowed judge edits
    if not approved and (judged or hold or settings.mode_requires_confirmation(name)):
        pid = await store_proposal(on.deps.env.state, settings, r, name, on.event, plan, diff, changes)
        why = None
        if judged:
            why = (f"the plan edits {', '.join(judged)}, which judge the fix: with "
                   f"modes.{name}.allow_judge_edits it waits for `autod approve`")
        elif hold:
            why = f"{hold}; it waits for `autod approve {pid}`"
        return Proposal(pid, edited(changes), why)
    delivery = on.deps.delivery
    if delivery is not None and delivery.isolated(name):  # verified elsewhere: branch or patch
        return Acted(await delivery.act(on.mode, on.event, r, on.deps.env, plan, changes), diff)
    return await in_tree(on, r, plan, changes, diff)


async def in_tree(on: Acting, r: Reflection, plan: Plan, changes: list[FileChange], diff: str) -> Acted:
    """Written through the journal, verified by the mode, kept or every edit rolled back.

    A stop or a crash mid-way rolls back too and returns no value: the record `r` is then told what was
    written and undone (its edits, checks and rollback), as `record` would have told it."""
    journal = Journal.begin(on.deps.env.settings.state_path, r.cycle_id)
    edits: list[dict[str, Any]] | None = None
    verification: Verification | None = None
    try:
        await asyncio.to_thread(journal.apply, changes, on_write=on.deps.own_writes.record)
        edits = edited(changes)
        log.info("act.applied", files=[c.rel for c in changes])
        verification = unjournaled(await on.mode.verify(on.event, plan, on.deps.env))
        kept = verification.status in KEPT
        if kept:
            await asyncio.to_thread(journal.keep)
    except BaseException:
        if edits is not None:
            r.edits = edits
        if verification is not None:
            r.checks = [c.record() for c in verification.checks]
        rollback = await rolled_back(journal, changes, on)
        if rollback is not None:
            r.rollback = rollback
        log.info("act.rolled_back", files=[c.rel for c in changes], rollback=r.rollback)
        raise
    assert verification is not None and edits is not None
    if kept:
        return Acted(verification, diff, edits, tuple(changes))
    rollback = await rolled_back(journal, changes, on)
    log.info("act.rolled_back", files=[c.rel for c in changes],
             rollback=rollback if rollback is not None else r.rollback)
    return Acted(verification, diff, edits, rollback=rollback)


async def report(on: Acting, plan: Plan) -> tuple[str, str | None]:
    """ACT for a plan with a report: (the cycle's status, where the mode wrote the report). A report-only
    mode always writes its report (it has facts even when the planner gave no text)."""
    mode = on.mode
    if not isinstance(mode, ReportWriter) or (not plan.report and mode.writes_code):
        return ("reported" if plan.report else "no_change"), None
    path = await mode.write_report(on.event, plan, on.deps.env, on.deps.own_writes)
    return "reported", str(path)


def record(r: Reflection, done: Acted | Proposal, event: Event) -> None:
    """What the act phase did, into the cycle's record."""
    if isinstance(done, Proposal):
        r.status, r.proposal_id, r.edits = Status.PENDING_APPROVAL, done.id, done.edits
        if done.why:
            r.reason = done.why
        return
    if done.edits is None:  # a delivery: it recorded what it wrote and where it went
        return
    v = done.verification
    r.edits, r.checks = done.edits, [c.record() for c in v.checks]
    if done.rollback is not None:
        r.rollback = done.rollback
    if done.kept:
        r.fix = describe_fix(list(done.kept), made_pass(event.payload, v.status))


async def rolled_back(journal: Journal, changes: list[FileChange], on: Acting) -> dict[str, list[str]] | None:
    """Every edit back (shielded: a stop never leaves half of them); what was restored and left."""
    await asyncio.shield(asyncio.to_thread(journal.rollback, on_write=on.deps.own_writes.record))
    return journal.outcome.record() if journal.outcome is not None else None


def edited(changes: list[FileChange]) -> list[dict[str, Any]]:
    """The record's `edits`: each file and the lines added and removed."""
    return [{"path": c.rel, "added": c.added, "removed": c.removed} for c in changes]
