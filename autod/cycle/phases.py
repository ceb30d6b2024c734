"""The Observe -> Plan -> Act -> Reflect cycle for one event and one mode. Nothing else.

`Cycle.run` reads as the cycle runs: observe, plan and act (re-planned attempt by attempt), then reflect
whatever happened. Each phase is a short method over one record; what it calls lives in a module of its
own: PLAN's recall and earlier attempts in autod.cycle.planning, the draws and the attempt loop in
autod.candidates; ACT in autod.cycle.act, which returns what became of a plan as a value the cycle
records; REFLECT in autod.cycle.reflect. Candidates are lent narrow callables (`into_tree`, `prepare`,
`phase`) and values (the record, `Tried`), never the cycle."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING

import structlog

from autod import logs, tally
from autod.act.edits import FileChange
from autod.candidates import Asker, CandidateSearch, InPlace, Tried
from autod.candidates.attempts import replay_first, run_attempts
from autod.candidates.clock import cycle_deadline
from autod.candidates.validate import choose_validator
from autod.cycle import planning
from autod.cycle.act import Acted, Acting, Proposal, act, prepare, record, report
from autod.cycle.deps import CycleDeps
from autod.cycle.reflect import (
    counted,
    distil_lesson,
    learned,
    left_in_files,
    log_reflection,
    observed,
    timing,
)
from autod.errors import CycleError
from autod.events import FAILURE_KINDS, Event
from autod.memory import Recalled
from autod.modes import Mode
from autod.plan import Plan
from autod.reflection import Reflection, after_earlier_attempts

if TYPE_CHECKING:
    from autod.transcripts import Transcript

__all__ = ["Cycle", "CycleDeps"]

log = structlog.get_logger("autod.cycle.phases")


class Cycle:
    """Runs one cycle. `run()` always returns a Reflection and always records it."""

    def __init__(self, deps: CycleDeps, mode: Mode, event: Event, *, approved: Plan | None = None) -> None:
        self.deps, self.mode, self.event = deps, mode, event
        self.approved = approved  # a proposal the operator approved: no planner, no second confirmation
        self.settings, self.state = deps.env.settings, deps.env.state
        self.r = Reflection(cycle_id=uuid.uuid4().hex[:12], event_id=event.id, mode=mode.name,
                            fingerprint=event.fingerprint, kind=str(event.kind), summary=event.summary,
                            merged=event.merged, planner=deps.planner_name)
        self.acting = Acting(deps, mode, event)  # what its act phase is given
        self.recalled: list[Recalled] = []
        self.tried = Tried()  # what its attempts told the planner, and left for the record
        self.earlier_cycles = 0  # cycles before this one that did not fix the same failure
        self.kept: tuple[FileChange, ...] = ()  # the changes kept in the tree (the episode's replay)
        self.transcript: Transcript | None = (
            deps.transcripts.open(self.r.cycle_id) if deps.transcripts is not None else None
        )
        self.transcribe = self.transcript.add if self.transcript is not None else None
        self._started = time.monotonic()
        self._spent: dict[str, int] = {}  # replaced by run()'s tally: the LLM's and the checks' time
        self.error: CycleError | None = None  # why it ended early (the retry policy reads it)
        self.phase_now = ""  # the phase it is in (the watchdog names it when a cycle wedges)
        self.drawing: CandidateSearch | None = None  # its candidate search, once made (`autod status`)

    async def run(self) -> Reflection:
        """OBSERVE, then PLAN and ACT, then REFLECT whatever happened: the record is always written."""
        with tally.counting() as self._spent:  # the LLM's and the checks' time, for the record's timing
            self._started = time.monotonic()
            logs.bind_cycle(self.r.cycle_id, self.event.id, self.mode.name)
            try:
                await self.observe()
                await self.plan_and_act()
            except CycleError as exc:  # one a cycle survives: the retry policy reads it
                self.error = exc
                self.r.status, self.r.reason = after_earlier_attempts(self.r, exc.status, exc.reason)
                self.r.external = exc.external and self.r.status == exc.status  # nothing was tried
            except asyncio.CancelledError:
                self.r.status, self.r.reason = "failed", "stopped: the daemon is shutting down"
                raise
            except Exception as exc:  # a bug: record it, keep the daemon alive
                self.r.status, self.r.reason = "failed", f"internal error: {type(exc).__name__}"
                log.exception("cycle.crashed")
            finally:
                # a reflect that fails loses the cycle record, the attempt count and the token booking:
                # never the daemon, but never silently either
                with logs.survive("cycle.reflect_failed", cycle_id=self.r.cycle_id, status=self.r.status):
                    await asyncio.shield(self.reflect())
                logs.clear_cycle()
        return self.r

    async def observe(self) -> None:
        """OBSERVE: the cycle's state row, its log line, the event in memory (N0)."""
        async with self.phase("observe"):
            e = self.event
            await self.state.call(self.state.cycle_started, self.r.cycle_id, e.id, self.mode.name,
                                  e.fingerprint, str(e.kind), e.summary)
            log.info("cycle.observed", kind=str(e.kind), summary=e.summary[:300], merged=e.merged)
            if self.deps.memory is not None:
                await observed(self.deps.memory, e, self.mode.name)

    async def plan_and_act(self) -> None:
        """PLAN and ACT. An approved plan is acted on as it is. Otherwise memory is recalled, and a fix it
        holds for this failure is tried first; then the mode's context is planned from and acted on."""
        if self.approved is not None:
            await self.act_approved(self.approved)
            return
        await self.recall()
        if not await self.replayed():
            await self.act(await self.plan())

    async def recall(self) -> None:
        """PLAN: what memory holds near this event (N0, N1, N2)."""
        async with self.phase("plan"):
            self.recalled = await planning.recall(self.deps.memory, self.event, self.settings)
            self.r.memory_used = [m.id for m in self.recalled]

    async def replayed(self) -> bool:
        """ACT before any plan: a fix memory holds for this failure, verified on the mirror and kept (no
        localization, no model call). True: the cycle is over."""
        if not (self.mode.writes_code and self.recalled):
            return False
        return await replay_first(await self.search(), r=self.r, tried=self.tried, into_tree=self.into_tree)

    async def plan(self) -> Asker:
        """PLAN: the mode's context (autod.localize's suspects for a failure) and what earlier cycles on
        the failure tried, in the asker that draws plans from them."""
        async with self.phase("plan"):
            context = await self.mode.context(self.event, self.deps.env, self.recalled)
            self.r.context = list(context.used)
        self.earlier_cycles, previous = await planning.earlier(self.state, self.event)
        if previous:
            self.tried.told.append(previous)
        editable = list(context.editable) if context.editable is not None else None
        return Asker(self.mode, self.event, self.r, context, self.tried.told, planner=self.deps.planner,
                     breaker=self.deps.breaker, settings=self.settings, boundary=self.deps.env.boundary,
                     editable=editable, record=self.transcribe)

    async def act(self, asker: Asker) -> None:
        """ACT, attempt by attempt: candidates drawn and verified, the winner kept in the tree, re-planned
        after a failed attempt (autod.candidates). A mode that writes no code writes a report."""
        if not self.mode.writes_code:
            async with self.phase("plan"):
                plan = (await asker.ask()).plan
            self.r.plan_summary = plan.summary
            await self.write_report(plan)
            return
        search = await self.search()
        search.drawer, search.retry = asker, self.earlier_cycles
        wrote = await run_attempts(search, planning.max_attempts(self.settings, self.mode.name), r=self.r,
                                   tried=self.tried, into_tree=self.into_tree)
        if wrote is not None:  # no fix, but a report to write
            await self.write_report(wrote)

    async def act_approved(self, plan: Plan) -> None:
        """ACT on the plan the operator approved: no planner, no second confirmation."""
        self.r.attempts, self.r.planner, self.r.plan_summary = 1, "operator-approved", plan.summary
        acted = await self.into_tree(plan)
        assert acted is not None  # approved: never held again
        self.r.status, self.r.reason = acted.verification.status, acted.verification.reason or None

    async def reflect(self) -> None:
        """REFLECT: the record's timing and end, the attempt counted and the day booked, the lesson and
        the episode in memory; then the log line, the state row and the transcript's outcome."""
        r = self.r
        async with self.phase("reflect"):
            r.timing = timing(self._started, self._spent)
            left_in_files(r)
            await counted(r, self.event, self.deps.gate, self.state, self.tried.last,
                          self.settings.limits.max_attempts_per_fingerprint)
            r.lesson = distil_lesson(r, self.event)
            await learned(self.deps.memory, r, self.event, self.tried.diff, self.kept)
        log_reflection(r)
        await self.state.call(self.state.cycle_finished, r.cycle_id, r.status, r.reason, r.record())
        if self.transcript is not None:
            self.transcript.add({"kind": "outcome", "status": r.status, "reason": r.reason})
            await self.transcript.flush()

    # -- what the phases lend candidates, and share ------------------------------------------------
    async def into_tree(self, plan: Plan, *, hold: str = "") -> Acted | None:
        """ACT on one plan (candidates' `IntoTree`): prepared under every act rule, then kept or rolled
        back in the tree, or held as a proposal (None; `hold`: why it needs a person's yes). What became
        of it is recorded; a kept one goes to the after-keep hooks (the commit, the undo ledger)."""
        async with self.phase("act"):
            changes, self.tried.diff = await prepare(self.acting, plan)
            done = await act(self.acting, self.r, plan, changes, self.tried.diff, hold=hold,
                             approved=self.approved is not None)
            record(self.r, done, self.event)
            if isinstance(done, Proposal):
                return None
            if done.kept:
                self.kept = done.kept
                for hook in self.deps.extra_after_keep:
                    await hook(self.r, self.event, done.diff, list(done.kept))
            return done

    async def write_report(self, plan: Plan) -> None:
        """ACT for a report: the mode writes it, and the record says where."""
        async with self.phase("act"):
            self.r.status, path = await report(self.acting, plan)
            if path is not None:
                self.r.report_path = path

    async def search(self) -> CandidateSearch:
        """The cycle's candidate search, made once, verifying on the workspace's mirror when it can be
        used (else in place, through `into_tree`); the fixes memory holds for the failure go first."""
        if self.drawing is not None:
            return self.drawing
        validator = await choose_validator(self.deps.isolation, self.mode, self.event, self.deps.env,
                                           InPlace(self.into_tree))
        cfg = planning.search_config(self.settings, self.deps.planner_name)
        per_day = self.settings.limits.max_tokens_per_day
        self.drawing = search = CandidateSearch(
            cfg, None, partial(prepare, self.acting), validator, record=self.transcribe, phase=self.phase,
            tokens_left=partial(planning.tokens_left, self.state, self.r, per_day),
            judged_by_behaviour=bool(self.mode.kinds & FAILURE_KINDS),
            deadline=cycle_deadline(cfg, self._started))
        if search.judged_by_behaviour and self.recalled:
            search.replays = await planning.replays(self.recalled, self.deps.env.boundary, self.event)
        return search

    @contextlib.asynccontextmanager
    async def phase(self, name: str) -> AsyncIterator[None]:
        """Times a phase into the record's `durations_ms` and names it in the log and for the watchdog."""
        logs.set_phase(name)
        self.phase_now = name
        start = time.monotonic()
        try:
            yield
        finally:
            ms = int((time.monotonic() - start) * 1000)
            self.r.durations_ms[name] = self.r.durations_ms.get(name, 0) + ms
