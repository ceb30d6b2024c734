"""The Observe -> Plan -> Act -> Reflect cycle for one event and one mode. Nothing else.

The four phases read top to bottom as the cycle runs, each a short method over one record. What a
phase calls lives elsewhere: candidate search and the attempt loop in autod.candidates (which borrows
`act`, `write_report` and `phase` from here), the outcome in autod.checks.outcome, memory writes and
timing in autod.cycle.reflect."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import structlog

from autod import logs, tally
from autod.act.edits import FileChange
from autod.candidates import Asker, CandidateSearch, InPlace, Isolated
from autod.candidates.attempts import Tried, left_behind, replay_first, run_attempts
from autod.candidates.clock import cycle_deadline
from autod.candidates.replay import for_failure, to_remember
from autod.candidates.validate import choose_validator
from autod.cycle.act import Acted, Acting, Proposal, act, prepare, record
from autod.cycle.deps import CycleDeps
from autod.cycle.reflect import distil_lesson, log_reflection, observed, remember, teaches, timing
from autod.errors import CycleError
from autod.events import FAILURE_KINDS, Event
from autod.memory import Recalled
from autod.modes import Attempt, Mode, ReportWriter
from autod.plan import Plan
from autod.reflection import Reflection, after_earlier_attempts
from autod.stores.state import day_key

if TYPE_CHECKING:
    from autod.transcripts import Transcript

log = structlog.get_logger("autod.cycle.phases")

# outcomes that count as an attempt on the failure's fingerprint (toward quarantine)
ATTEMPT_STATUSES = ("fixed", "improved", "rolled_back", "partly_rolled_back", "rejected", "no_change")


class Cycle:
    """Runs one cycle. `run()` always returns a Reflection and always records it."""

    def __init__(self, deps: CycleDeps, mode: Mode, event: Event, *, approved: Plan | None = None) -> None:
        self.deps = deps
        self.approved = approved  # a proposal the operator approved: no planner, no second confirmation
        self.mode = mode
        self.event = event
        self.settings = deps.env.settings
        self.state = deps.env.state
        self.r = Reflection(
            cycle_id=uuid.uuid4().hex[:12],
            event_id=event.id,
            mode=mode.name,
            fingerprint=event.fingerprint,
            kind=str(event.kind),
            summary=event.summary,
            merged=event.merged,
            planner=deps.planner_name,
        )
        self.recalled: list[Recalled] = []
        self.tried = Tried()  # what its attempts told the planner, and left for the record
        self.earlier_cycles = 0  # cycles before this one that did not fix the same failure
        self.transcript: Transcript | None = (
            deps.transcripts.open(self.r.cycle_id) if deps.transcripts is not None else None
        )
        self._started = time.monotonic()
        self._spent: dict[str, int] = {}  # replaced by run()'s tally: the LLM's and the checks' time
        self.error: CycleError | None = None  # why it ended early (the retry policy reads it)
        self.phase_now = ""  # the phase it is in (the watchdog names it when a cycle wedges)
        self.drawing: CandidateSearch | None = None  # its draws so far, for `autod status`
        self.acting = Acting(deps, mode, event)  # what its act phase is given

    # -- the cycle -------------------------------------------------------------------
    async def run(self) -> Reflection:
        with tally.counting() as self._spent:  # the LLM's and the checks' time, for `timing`
            self._started = time.monotonic()
            return await self._run()

    async def _run(self) -> Reflection:
        logs.bind_cycle(self.r.cycle_id, self.event.id, self.mode.name)
        try:
            async with self.phase("observe"):
                await self.observe()
            await self.plan_and_act()
        except CycleError as exc:
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
        await self.state.call(self.state.cycle_started, self.r.cycle_id, self.event.id, self.mode.name,
                              self.event.fingerprint, str(self.event.kind), self.event.summary)
        log.info(
            "cycle.observed",
            kind=str(self.event.kind),
            summary=self.event.summary[:300],
            merged=self.event.merged,
        )
        if self.deps.memory is not None:
            await observed(self.deps.memory, self.event, self.mode.name)

    async def plan_and_act(self) -> None:
        """PLAN and ACT: candidates drawn, filtered and verified, re-planned after a failed attempt."""
        if self.approved is not None:
            self.r.attempts, self.r.planner = 1, "operator-approved"
            self.r.plan_summary = self.approved.summary
            acted = await self.into_tree(self.approved)
            assert acted is not None  # approved: never held again
            self.r.status, self.r.reason = acted.verification.status, acted.verification.reason or None
            return
        async with self.phase("plan"):
            await self.recall()
        # a fix memory holds for this failure, kept: no localization, no model call
        if self.mode.writes_code and self.recalled and await replay_first(
                await self.new_search(), r=self.r, tried=self.tried, into_tree=self.into_tree):
            return
        async with self.phase("plan"):
            context = await self.mode.context(self.event, self.deps.env, self.recalled)
            self.r.context = list(context.used)
            editable = context.editable
        previous = await self.previous_attempt()
        if previous:
            self.tried.told.append(previous)
        record = self.transcript.add if self.transcript is not None else None
        asker = Asker(self.mode, self.event, self.r, context, self.tried.told, planner=self.deps.planner,
                      breaker=self.deps.breaker, settings=self.settings, boundary=self.deps.env.boundary,
                      editable=list(editable) if editable is not None else None, record=record)
        if not self.mode.writes_code:
            async with self.phase("plan"):
                plan = (await asker.ask()).plan
            self.r.plan_summary = plan.summary
            async with self.phase("act"):
                await self.write_report(plan)
            return
        await self.search(asker)

    async def search(self, asker: Asker) -> None:
        """Attempt by attempt: draw candidates, keep the winner (written and verified in the tree)."""
        search = self.searching or await self.new_search()
        search.drawer, search.retry = asker, self.earlier_cycles
        max_attempts = getattr(self.settings.modes.get(self.mode.name), "max_attempts_per_cycle", 1)
        report = await run_attempts(search, max_attempts, r=self.r, tried=self.tried,
                                    into_tree=self.into_tree)
        if report is not None:  # a plan without edits that has a report to write
            async with self.phase("act"):
                await self.write_report(report)

    async def new_search(self) -> CandidateSearch:
        """The cycle's candidate search, with the fixes memory holds for this failure to try first (its
        drawer is set once there is a prompt to draw from)."""
        cfg = self.settings.candidates
        if self.deps.planner_name != "llm":  # a deterministic planner (the offline rules): one plan
            cfg = cfg.model_copy(update={"n": 1, "focused": 0})
        self.searching = self.drawing = search = CandidateSearch(
            cfg, None, self.prepare_changes, await self.validator(), tokens_left=self.tokens_left,
            record=self.transcript.add if self.transcript is not None else None, phase=self.phase,
            judged_by_behaviour=bool(self.mode.kinds & FAILURE_KINDS),
            deadline=cycle_deadline(cfg, self._started))
        if search.judged_by_behaviour and self.recalled:
            search.replays = await asyncio.to_thread(for_failure, self.recalled, self.deps.env.boundary,
                                                     fingerprint=self.event.fingerprint,
                                                     payload=self.event.payload)
        return search

    async def validator(self) -> InPlace | Isolated:
        """Candidates are verified on the workspace's mirror when it can be used, else in place."""
        return await choose_validator(self.deps.isolation, self.mode, self.event, self.deps.env,
                                      InPlace(self.into_tree))

    async def prepare_changes(self, plan: Plan) -> tuple[list[FileChange], str]:
        return await prepare(self.acting, plan)

    async def tokens_left(self) -> bool:
        """Whether the day's LLM token budget still has room for another draw."""
        spent = await self.state.call(self.state.get, f"tokens:{day_key()}")
        return spent + self.r.tokens["prompt"] + self.r.tokens["completion"] < (
            self.settings.limits.max_tokens_per_day
        )

    async def recall(self) -> None:
        if self.deps.memory is None:
            return
        query = f"{self.event.summary}\n{str(self.event.payload.get('excerpt', ''))[:1500]}"
        try:
            self.recalled = await self.deps.memory.recall(
                query, budget_tokens=self.settings.memory.recall_tokens, k=self.settings.memory.recall_k
            )
        except Exception as exc:  # memory trouble must not stop a fix
            log.warning("memory.recall_failed", error=type(exc).__name__)
            self.recalled = []
        self.r.memory_used = [m.id for m in self.recalled]

    async def previous_attempt(self) -> Attempt | None:
        if self.event.kind not in FAILURE_KINDS:
            return None
        fp = await self.state.call(self.state.fingerprint, self.event.fingerprint)
        self.earlier_cycles = int((fp or {}).get("attempts") or 0)
        last = (fp or {}).get("last_attempt")
        if not last:
            return None
        summary, diff, output = last.get("summary", ""), last.get("diff", ""), last.get("output", "")
        return Attempt(summary, diff, output, earlier_cycle=True)

    async def into_tree(self, plan: Plan, *, hold: str = "") -> Acted | None:
        """ACT on one plan (lent to candidates as their `IntoTree`): prepared under every act rule, then
        kept or rolled back in the tree, or held as a proposal (None; `hold`: why it needs a person's
        yes); what became of it is recorded, and a kept one goes to the after-keep hooks."""
        async with self.phase("act"):
            changes, self.tried.diff = await prepare(self.acting, plan)
            done = await act(self.acting, self.r, plan, changes, self.tried.diff, hold=hold,
                             approved=self.approved is not None)
            record(self.r, done, self.event)
            if isinstance(done, Proposal):
                return None
            if done.kept:
                self.kept = done.kept
                for hook in self.deps.extra_after_keep:  # the commit, the undo ledger: they see the record
                    await hook(self.r, self.event, done.diff, list(done.kept))
            return done

    async def write_report(self, plan: Plan) -> None:
        mode = self.mode
        # a report-only mode always writes its report (it has facts even when the planner gave no text)
        if not isinstance(mode, ReportWriter) or (not plan.report and mode.writes_code):
            self.r.status = "reported" if plan.report else "no_change"
            return
        path = await mode.write_report(self.event, plan, self.deps.env, self.deps.own_writes)
        self.r.status, self.r.report_path = "reported", str(path)

    async def reflect(self) -> None:
        async with self.phase("reflect"):
            r = self.r
            r.timing = timing(self._started, self._spent)
            left = left_behind(r)
            if left:  # never a clean `rolled_back` while autod's edit may still be in a file
                r.status = "partly_rolled_back"
                why = f"rollback left {', '.join(left)}: changed by someone else after autod wrote it"
                r.reason = f"{why}; {r.reason}" if r.reason else why
            if r.status in ATTEMPT_STATUSES:
                attempt = self.tried.last
                if r.status == "rejected":
                    attempt = {"summary": r.plan_summary or "", "diff": "", "output": f"rejected: {r.reason}"}
                r.quarantined = await self.state.call(
                    self.deps.gate.record_attempt, self.event, r.status, attempt
                )
                if r.quarantined:
                    log.warning(
                        "quarantine.added",
                        fingerprint=self.event.fingerprint,
                        attempts=self.settings.limits.max_attempts_per_fingerprint,
                    )
            # a proposal lists the edits it would make but wrote nothing: its approval books them
            written = 0 if r.status == "pending_approval" else len(r.edits)
            await self.state.call(
                self.deps.gate.book, edits=written, tokens=r.tokens["prompt"] + r.tokens["completion"]
            )
            r.lesson = distil_lesson(r, self.event)
            if self.deps.memory is not None and teaches(r):  # an outage teaches nothing about the code
                replay = await asyncio.to_thread(to_remember, self.kept, self.event.payload) if (
                    r.status in ("fixed", "improved")) else ""
                await remember(self.deps.memory, r, self.tried.diff, replay=replay)
        log_reflection(r)
        await self.state.call(self.state.cycle_finished, r.cycle_id, r.status, r.reason, r.record())
        if self.transcript is not None:
            self.transcript.add({"kind": "outcome", "status": r.status, "reason": r.reason})
            await self.transcript.flush()

    # -- helpers -----------------------------------------------------------------------
    kept: tuple[FileChange, ...] = ()  # the changes kept in the tree (the episode's replay)
    searching: CandidateSearch | None = None  # the cycle's candidate search, once made

    @contextlib.asynccontextmanager
    async def phase(self, name: str) -> AsyncIterator[None]:
        logs.set_phase(name)
        self.phase_now = name
        start = time.monotonic()
        try:
            yield
        finally:
            ms = int((time.monotonic() - start) * 1000)
            self.r.durations_ms[name] = self.r.durations_ms.get(name, 0) + ms
