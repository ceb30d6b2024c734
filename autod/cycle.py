"""The Observe -> Plan -> Act -> Reflect cycle for one event and one mode. Nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from autod import logs
from autod.act.edits import FileChange, prepare, unified_diff
from autod.act.journal import Journal
from autod.act.judges import Judges, editable_paths, requires_approval
from autod.checkbook import unjournaled
from autod.errors import (
    BudgetExhausted,
    ContextTooLong,
    CycleError,
    LLMUnavailable,
    PlanInvalid,
    PlanRejected,
)
from autod.events import FAILURE_KINDS, Event
from autod.limits import CircuitBreaker, Gate
from autod.memory import Memory, Recalled
from autod.modes import Attempt, Mode, ModeEnv, Verification, chain, pack, tokens
from autod.modes import render as render_prompt
from autod.ownwrites import OwnWrites
from autod.plan import Plan
from autod.planner import Planner, PlanRequest, PlanResult
from autod.reflect import Reflection, distil_lesson, episode_text, log_reflection

log = structlog.get_logger("autod.cycle")

# A re-plan that repeats a failed attempt word for word is asked once more at this temperature at
# least. Measured with Qwen2.5-Coder-1.5B (docs/REAL_LLM.md): every re-plan sampled at 0.7 fixed
# fewer bugs than at 0.1, so only the repeat, which at 0.1 is otherwise certain to fail, is warmed.
REPEAT_TEMPERATURE = 0.7
# outcomes that count as an attempt on the failure's fingerprint (toward quarantine)
ATTEMPT_STATUSES = ("fixed", "improved", "rolled_back", "partly_rolled_back", "rejected", "no_change")


@dataclass
class CycleDeps:
    env: ModeEnv
    gate: Gate
    planner: Planner
    planner_name: str
    own_writes: OwnWrites
    breaker: CircuitBreaker | None = None
    extra_after_keep: list = field(default_factory=list)  # callables(reflection, changes) e.g. git commit
    delivery: Any = None  # autod.delivery.Delivery: branch/patch modes never write the working tree

    @property
    def memory(self) -> Memory | None:
        return self.env.memory


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
        self.attempts: list[Attempt] = []
        self.need_answered = False
        self.editable: list[str] | None = None  # the files the prompt shows for editing (plan paths)
        self.extra_messages: list[dict[str, str]] = []  # the need round, appended to the mode's messages
        # each attempt's edits and its number under "Earlier attempts", to spot a repeat
        self.tried: list[tuple[tuple[tuple[str, str, str], ...], int]] = []
        self.last_attempt: dict[str, str] | None = None
        self.error: CycleError | None = None  # why it ended early (the retry policy reads it)
        self.phase_now = ""  # the phase it is in (the watchdog names it when a cycle wedges)

    # -- the cycle -------------------------------------------------------------------
    async def run(self) -> Reflection:
        logs.bind_cycle(self.r.cycle_id, self.event.id, self.mode.name)
        try:
            async with self.phase("observe"):
                await self.observe()
            await self.plan_and_act()
        except CycleError as exc:
            self.error = exc
            self.r.status, self.r.reason = exc.status, exc.reason
        except asyncio.CancelledError:
            self.r.status, self.r.reason = "failed", "stopped: the daemon is shutting down"
            raise
        except Exception as exc:  # a bug: record it, keep the daemon alive
            self.r.status, self.r.reason = "failed", f"internal error: {type(exc).__name__}"
            log.exception("cycle.crashed")
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.reflect())
            logs.clear_cycle()
        return self.r

    async def observe(self) -> None:
        await self.state.call(
            self.state.cycle_started,
            self.r.cycle_id,
            self.event.id,
            self.mode.name,
            self.event.fingerprint,
            str(self.event.kind),
            self.event.summary,
        )
        log.info(
            "cycle.observed",
            kind=str(self.event.kind),
            summary=self.event.summary[:300],
            merged=self.event.merged,
        )
        if self.deps.memory is not None:
            from autod.localize.excerpt import strip_progress

            # progress dots and timings would make every run of the same failure a new memory
            excerpt = strip_progress(str(self.event.payload.get("excerpt", "")))[:2000]
            text = logs.redact_text(f"{self.event.kind}: {self.event.summary}\n{excerpt}")
            try:
                await self.deps.memory.observe(
                    text,
                    {
                        "kind": str(self.event.kind),
                        "fingerprint": self.event.fingerprint,
                        "mode": self.mode.name,
                        "event_id": self.event.id,
                    },
                )
            except Exception as exc:  # memory trouble is never a reason to fail a cycle
                log.warning("memory.observe_failed", error=type(exc).__name__)

    async def plan_and_act(self) -> None:
        """PLAN and ACT, re-planning after a rolled-back attempt (up to max_attempts_per_cycle)."""
        if self.approved is not None:
            self.r.attempts, self.r.plan_summary, self.r.planner = (
                1,
                self.approved.summary,
                "operator-approved",
            )
            async with self.phase("act"):
                verification = await self.act(self.approved)
            assert verification is not None
            self.r.status, self.r.reason = verification.status, verification.reason or None
            return
        async with self.phase("plan"):
            await self.recall()
            context = await self.mode.context(self.event, self.deps.env, self.recalled)
            self.r.context = list(getattr(context, "used", []))
            editable = getattr(context, "editable", None)
            self.editable = list(editable) if editable is not None else None
        previous = await self.previous_attempt()
        if previous:
            self.attempts.append(previous)
        max_attempts = getattr(self.settings.modes.get(self.mode.name), "max_attempts_per_cycle", 1)
        for attempt in range(1, max_attempts + 1):
            self.r.attempts += 1
            async with self.phase("plan"):
                result = await self.ask_planner(context)
                if result.plan.need and not self.need_answered:
                    # two stages: the model asked to see definitions before it edits; answered once
                    await self.answer_need(result.plan)
                    result = await self.ask_planner(context)
                if self.repeated(result.plan):
                    # a model sampled cold tends to send a failed plan again word for word: ask once
                    # more, warmer, saying so (a repeat that still comes back is refused below)
                    log.info("plan.repeated_asking_again", attempt=self.repeated(result.plan))
                    result = await self.ask_planner(context, repeats=result.plan)
            plan = result.plan
            self.r.plan_summary = plan.summary
            if not self.mode.writes_code:
                async with self.phase("act"):
                    await self.write_report(plan)
                return
            if not plan.edits:
                self.r.status = "no_change"
                self.r.reason = "the planner proposed no edits"
                if plan.report:
                    async with self.phase("act"):
                        await self.write_report(plan)
                return
            try:
                if n := self.repeated(plan):
                    raise PlanRejected(f"the plan repeats attempt {n}, which did not work: try another fix")
                self.tried.append((_edit_key(plan), len(self.attempts) + 1))  # its number in the prompt
                async with self.phase("act"):
                    verification = await self.act(plan)
            except PlanRejected as exc:
                self.r.refusals.append(exc.reason[:1000])
                if attempt == max_attempts:
                    raise
                # refused unwritten (a search text not found, a path outside...): ask again with the reason
                log.info("plan.refused_replanning", reason=exc.reason)
                self.attempts.append(Attempt(plan.summary, "", f"refused by autod's act rules: {exc.reason}"))
                continue
            if verification is None:  # stored as a proposal
                return
            self.r.status, self.r.reason = verification.status, verification.reason or None
            if verification.status != "rolled_back" or self._left_behind():
                return  # a file someone else changed meanwhile: no second attempt over their work
            self.attempts.append(Attempt(plan.summary, self._last_diff, verification.output))
            self.last_attempt = self.attempts[-1].as_dict()

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
        last = (fp or {}).get("last_attempt")
        if not last:
            return None
        return Attempt(last.get("summary", ""), last.get("diff", ""), last.get("output", ""))

    async def answer_need(self, plan: Plan) -> None:
        from autod.localize.need import answer_need
        from autod.modes import render

        self.need_answered = True
        budget = int(self.settings.localize.budget_tokens * 0.5)
        answer = await answer_need(self.settings, self.deps.env.boundary, plan.need, budget)
        self.r.context += answer.entries
        if self.editable is not None:  # what the model asked to see, it may edit
            self.editable += [str(e["path"]) for e in answer.entries if e.get("path")]
        log.info("localize.need_answered", asked=len(plan.need), shown=len(answer.entries))
        asked = plan.model_dump(include={"summary", "need"})
        self.extra_messages = [
            {"role": "assistant", "content": json.dumps(asked)},
            {"role": "user", "content": render("need_answer", definitions=answer.text or "(nothing found)")},
        ]

    def messages_for(self, context: dict[str, str]) -> list[dict[str, str]]:
        # the last line of defence: no configured secret value leaves in a prompt
        return [
            {**m, "content": logs.redact_secrets(m["content"])} if isinstance(m.get("content"), str) else m
            for m in [*self.mode.messages(self.event, context, self.attempts), *self.extra_messages]
        ]

    def repeated(self, plan: Plan) -> int:
        """The number (as the prompt lists it) of this cycle's attempt whose edits `plan` repeats, or 0."""
        if not plan.edits:
            return 0
        key = _edit_key(plan)
        return next((n for k, n in self.tried if k == key), 0)

    async def ask_planner(self, context: dict[str, str], *, repeats: Plan | None = None) -> PlanResult:
        messages = self.messages_for(context)
        temperature = None
        if repeats is not None:
            shown = repeats.model_dump(include={"summary", "edits"})
            messages += [
                {"role": "assistant", "content": json.dumps(shown)[:4000]},
                {"role": "user", "content": render_prompt("repeated_plan", attempt=self.repeated(repeats))},
            ]
            temperature = max(REPEAT_TEMPERATURE, self.settings.llm.temperature)
        request = PlanRequest(
            mode=self.mode.name,
            event=self.event,
            messages=messages,
            context={**context, "attempts": [a.as_dict() for a in self.attempts]},
            paths=await asyncio.to_thread(self.edit_paths),  # stats files and reads check scripts
            temperature=temperature,
        )
        breaker = self.deps.breaker
        try:
            result = await self.plan_fitting(request, context)
        except CycleError as exc:
            for key, spent in (exc.tokens or {}).items():  # a failed plan's tokens are spent all the same
                self.r.tokens[key] += spent
            if breaker is not None and isinstance(exc, LLMUnavailable | PlanInvalid):
                breaker.failure()
            raise
        if breaker is not None:
            breaker.success()
        self.r.tokens["prompt"] += result.tokens.prompt
        self.r.tokens["completion"] += result.tokens.completion
        log.info(
            "plan.planned",
            summary=result.plan.summary[:300],
            edits=len(result.plan.edits),
            tokens=result.tokens.total,
        )
        return result

    def edit_paths(self) -> tuple[str, ...] | None:
        """The files the prompt showed (so far: a `need` answer adds some) that a plan may edit.

        None leaves `path` free: a mode that writes no code, or a context that showed no file.
        """
        if not self.mode.writes_code or not self.editable:
            return None
        judges = Judges.for_settings(self.settings, self.mode.name)
        paths = editable_paths(self.editable, self.deps.env.boundary, judges)
        return paths or None

    async def plan_fitting(self, request: PlanRequest, context: dict[str, str]) -> PlanResult:
        """Ask the planner; a prompt over the model's context is asked once more with less context."""
        try:
            return await self.deps.planner.plan(request)
        except ContextTooLong as exc:
            # Not an outage (the breaker is left alone): cut the lowest-ranked context to fit.
            budget = int(sum(tokens(v) for v in context.values() if v) * exc.fit())
            smaller = pack(list(context.items()), budget)
            if smaller == context:
                raise
            log.warning("cycle.context_shrunk", reason=exc.reason[:300], budget_tokens=budget)
            smaller_request = dataclasses.replace(request, messages=self.messages_for(smaller))
            return await self.deps.planner.plan(smaller_request)

    async def act(self, plan: Plan) -> Verification | None:
        """Apply under every act rule, verify, keep or roll back. None: stored as a proposal."""
        changes, self._last_diff = await self.prepare(plan)
        judged = requires_approval(self.settings, self.mode.name, changes)  # allowed judge edits
        if self.approved is None and (judged or self.settings.mode_requires_confirmation(self.mode.name)):
            await self.propose(plan, changes)
            if judged:
                self.r.reason = (
                    f"the plan edits {', '.join(judged)}, which judge the fix: with "
                    f"modes.{self.mode.name}.allow_judge_edits it waits for `autod approve`"
                )
            return None
        if self.deps.delivery is not None and self.deps.delivery.isolated(self.mode.name):
            return await self.deps.delivery.act(self, plan, changes)  # verified elsewhere: branch or patch
        journal = Journal.begin(self.settings.state_path, self.r.cycle_id)
        kept = False
        try:
            await asyncio.to_thread(journal.apply, changes, on_write=self.deps.own_writes.record)
            self.r.edits = [{"path": c.rel, "added": c.added, "removed": c.removed} for c in changes]
            log.info("act.applied", files=[c.rel for c in changes])
            verification = unjournaled(await self.mode.verify(self.event, plan, self.deps.env))
            self.r.checks = [c.record() for c in verification.checks]
            if verification.status in ("fixed", "improved", "no_change"):
                await asyncio.to_thread(journal.keep)
                kept = True
                for hook in self.deps.extra_after_keep:
                    await hook(self, changes)
            return verification
        finally:
            if not kept:
                # a failed verification, an exception or a stop: every edit goes back
                await asyncio.shield(
                    asyncio.to_thread(journal.rollback, on_write=self.deps.own_writes.record)
                )
                if journal.outcome is not None:
                    self.r.rollback = journal.outcome.record()
                log.info("act.rolled_back", files=[c.rel for c in changes], rollback=self.r.rollback)

    async def prepare(self, plan: Plan) -> tuple[list[FileChange], str]:
        """The plan's changes and their diff, computed in a worker thread (never on the event loop)."""
        caps = await self.state.call(self.deps.gate.caps)
        if caps.max_edits <= 0:  # the day's budget, not the plan: the event waits (autod.retry)
            raise BudgetExhausted("max_edits_per_day reached")
        scope = chain(self.mode.scope(self.deps.env))
        boundary = self.deps.env.boundary
        stop = threading.Event()

        def work() -> tuple[list[FileChange], str]:
            changes = prepare(plan, boundary, caps, scope=scope, stop=stop)
            return changes, unified_diff(changes)

        try:
            return await asyncio.to_thread(work)
        except asyncio.CancelledError:
            stop.set()  # the thread ends at its next check: a stop never waits for a huge plan
            raise

    async def propose(self, plan: Plan, changes: list[FileChange]) -> None:
        pid = uuid.uuid4().hex[:10]
        now = time.time()
        superseded = await self.state.call(
            self.state.add_proposal,
            {
                "id": pid,
                "cycle_id": self.r.cycle_id,
                "mode": self.mode.name,
                "event": self.event.model_dump_json(),
                "plan": plan.model_dump_json(),
                "diff": self._last_diff,
                "created_at": now,
                "expires_at": now + self.settings.limits.proposal_ttl_h * 3600,
            },
        )
        self.r.status, self.r.proposal_id = "pending_approval", pid
        self.r.edits = [{"path": c.rel, "added": c.added, "removed": c.removed} for c in changes]
        log.info("proposal.stored", proposal_id=pid, files=[c.rel for c in changes], superseded=superseded)

    async def write_report(self, plan: Plan) -> None:
        writer = getattr(self.mode, "write_report", None)
        # a report-only mode always writes its report (it has facts even when the planner gave no text)
        if writer is None or (not plan.report and self.mode.writes_code):
            self.r.status = "reported" if plan.report else "no_change"
            return
        path: Path = await writer(self.event, plan, self.deps.env, self.deps.own_writes)
        self.r.status, self.r.report_path = "reported", str(path)

    def _left_behind(self) -> list[str]:
        """Files a rollback left because someone else changed them after autod wrote them."""
        return list((self.r.rollback or {}).get("left") or [])

    async def reflect(self) -> None:
        async with self.phase("reflect"):
            r = self.r
            left = self._left_behind()
            if left:  # never a clean `rolled_back` while autod's edit may still be in a file
                r.status = "partly_rolled_back"
                why = f"rollback left {', '.join(left)}: changed by someone else after autod wrote it"
                r.reason = f"{why}; {r.reason}" if r.reason else why
            if r.status in ATTEMPT_STATUSES:
                attempt = self.last_attempt
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
            if self.deps.memory is not None:
                await self.remember()
        log_reflection(r)
        await self.state.call(self.state.cycle_finished, r.cycle_id, r.status, r.reason, r.record())

    async def remember(self) -> None:
        r, mem = self.r, self.deps.memory
        assert mem is not None
        meta = {
            "fingerprint": r.fingerprint,
            "mode": r.mode,
            "status": r.status,
            "kind": r.kind,
            "cycle_id": r.cycle_id,
        }
        try:
            episode = episode_text(r, self._last_diff)
            # deferred: the memory's writer stores them off the cycle's path; the next recall waits for them
            await mem.add_episode(logs.redact_text(episode), meta, defer=True)
            if r.lesson:
                lesson = logs.redact_text(r.lesson)
                await mem.add_lesson(lesson, meta, success=r.status in ("fixed", "improved"), defer=True)
        except Exception as exc:
            log.warning("memory.write_failed", error=type(exc).__name__)

    # -- helpers -----------------------------------------------------------------------
    _last_diff: str = ""

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


def _edit_key(plan: Plan) -> tuple[tuple[str, str, str], ...]:
    """A plan's edits with whitespace runs folded: two plans with the same key make the same change."""
    return tuple(
        (e.path.strip(), " ".join(e.search.split()), " ".join(e.replace.split()))
        for e in plan.edits
    )
