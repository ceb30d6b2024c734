"""Asking the planner for plans from a mode's prompt: one place for everything around a request.

The mode's messages with the attempts so far; the need round (the model may ask once, per cycle, to
see more definitions before it edits); the files and definitions a plan may name (sent in the schema);
fitting the prompt to the server's context before sending it (and once more, smaller, after a context
refusal); the breaker; the tokens every request spent, booked on the cycle's record whatever happened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from autod import logs
from autod.act.judges import Judges, editable_paths
from autod.candidates.fits import MISSED, written_tokens
from autod.candidates.order import ratio_of
from autod.candidates.reask import POINTED_LINES, pointed_messages
from autod.errors import ContextTooLong, CycleError, LLMUnavailable
from autod.linebreaks import lines_of
from autod.modes import Attempt, Mode, Sections, pack, render, tokens
from autod.planner import (
    CHARS_PER_TOKEN,
    TEMPLATE_TOKENS,
    Planner,
    PlanRequest,
    PlanResult,
    ServerPlanner,
    estimated_tokens,
)
from autod.planner.earlystop import Watched
from autod.planner.forms import FORMS

if TYPE_CHECKING:
    from autod.config.settings import Settings
    from autod.events import Event
    from autod.plan import Plan
    from autod.reflection import Reflection
    from autod.safety.boundary import Boundary

log = structlog.get_logger("autod.candidates")


class Breaker(Protocol):
    """The LLM circuit breaker (autod.cycle.limits.CircuitBreaker), told how each request went."""

    def success(self) -> None: ...

    def failure(self) -> None: ...


class Asker:
    """Builds each request of a cycle's planning and sends it to the planner."""

    def __init__(
        self,
        mode: Mode,
        event: Event,
        r: Reflection,
        context: Sections,
        attempts: list[Attempt],
        *,
        planner: Planner,
        breaker: Breaker | None,
        settings: Settings,
        boundary: Boundary,
        editable: list[str] | None,
        record: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """`attempts`: what the prompt tells of the attempts so far (the attempt loop adds to it);
        `settings` and `boundary`: which files a plan may name, and what the need round may show."""
        self.planner = planner
        self.breaker = breaker
        self.boundary = boundary
        self.mode = mode
        self.event = event
        self.r = r
        self.settings = settings
        self.context = context
        self.attempts = attempts
        self.editable = editable
        self.record = record
        self.need_answered = False
        self.extra_messages: list[dict[str, str]] = []
        # the mode's narrower views of the same failure, one per suspect (Sections.focused)
        self.focused: list[dict[str, str]] = list(context.focused or [])
        # per suspect (path, symbol): the lines its draws' leg one named and leg two wrote back unchanged;
        # its later draws may not name them (autod.planner.point, autod.planner.linechoice)
        self.echoed: dict[tuple[str, str], list[str]] = {}

    @property
    def form(self) -> str:
        """How the mode asks plans to be written (llm.reply_form for auto-debug; JSON elsewhere)."""
        return self.mode.reply_form

    @property
    def has_focus(self) -> bool:
        """Whether a focused view exists for this failure (else every draw sees the wide prompt)."""
        return bool(self.focused)

    @property
    def suspects(self) -> int:
        """How many suspect definitions the focused view has: `view="focused:K"` asks about the Kth
        (from 1)."""
        return sum(1 for f in self.focused if not f.get("read_by"))

    @property
    def suspect_sizes(self) -> list[tuple[int, int]]:
        """Per suspect: (its definition's tokens, its prompt's own tokens: the definition and the values
        it reads), estimated from characters (autod.candidates.order prices its draws by them)."""
        return [(int(len(f.get("code") or "") / CHARS_PER_TOKEN),
                 int((len(f.get("code") or "") + len(f.get("values") or "")) / CHARS_PER_TOKEN))
                for f in self.focused if not f.get("read_by")]

    @property
    def suspect_replies(self) -> list[int]:
        """Per suspect: the tokens of a reply that will be generated, when replies are read as they
        stream (the code form): from the end of its head (decorators, signature, docstring: given to a
        greedy reply, and a sample's docstring too, where the server takes the answer's start,
        autod.planner.prefill) through the last line the failing tests ran in it, where the early stop
        ends them, or, for a long one, what its two legs write (`llm.point_lines`, autod.planner.point;
        a leg one that may miss priced as `fits.MISSED` whole copies); else all of it. The order and the
        deadline price a draw by it (autod.candidates.fits)."""
        out = []
        streamed = self.form == "code"
        pointing = self.settings.llm.point_lines if streamed else 0
        missed = 0.0 if self.holds_lines else MISSED
        for f in self.focused:
            if f.get("read_by"):
                continue
            code, ran_to, given = f.get("code") or "", f.get("ran_to") or "", f.get("head_lines") or ""
            ran = int(ran_to) if ran_to.isdigit() and streamed else 0
            head = int(given) if given.isdigit() and streamed else 0
            out.append(written_tokens(code, ran, CHARS_PER_TOKEN, head, pointing, missed,
                                      self.settings.llm.point_above, ratio_of(self)))
        return out

    @property
    def one_choice(self) -> bool:
        """Whether a suspect's or a value group's draws are asked one choice a request: in the code form
        with `llm.stop_early`, a one-choice reply is streamed and watched (its head given, ended once it
        cannot change the fix, a long one asked in two legs: autod.planner.earlystop, .prefill, .point),
        all of which a request for several choices forgoes, each choice written whole; a server that
        keeps the prompt it last read serves the next one-choice request's from its cache."""
        return self.form == "code" and self.settings.llm.stop_early

    @property
    def read_per_generated(self) -> float | None:
        """A prompt token's time in generated tokens' on the planner's server, as its streamed replies
        measured it (autod.planner.pace); None until they have, or for a planner with no server."""
        return self.planner.read_per_generated if isinstance(self.planner, ServerPlanner) else None

    @property
    def holds_lines(self) -> bool:
        """A long suspect's leg one cannot miss on the planner's server (a grammar holds it to the
        definition's lines, autod.planner.linechoice); False for a planner with no server."""
        return isinstance(self.planner, ServerPlanner) and self.planner.holds_lines

    @property
    def write_seconds(self) -> float | None:
        """Seconds a reply token takes on the planner's server, as its streamed replies measured it
        (autod.planner.pace); None until they have, or for a planner with no server."""
        return self.planner.write_seconds if isinstance(self.planner, ServerPlanner) else None

    @property
    def value_sizes(self) -> list[int]:
        """Per value group: its values' tokens (a draw's reply and its prompt's own part), estimated."""
        return [int(len(f.get("blocks") or "") / CHARS_PER_TOKEN) for f in self.focused if f.get("read_by")]

    @property
    def wide_tokens(self) -> int:
        """The wide prompt's tokens as the first attempt sends it, estimated from its characters."""
        return int(estimated_tokens(self.messages_for(self.context)))

    @property
    def value_suspects(self) -> int:
        """How many value groups follow them: `view="value:J"` asks about the Jth (from 1)."""
        return len(self.focused) - self.suspects

    def _suspect(self, view: str) -> dict[str, str] | None:
        kind, _, k = view.partition(":")
        group = [f for f in self.focused if bool(f.get("read_by")) == (kind == "value")]
        if kind not in ("focused", "pointed", "value") or not group:  # pointed: autod.candidates.reask
            return None
        i = int(k) - 1 if k.isdigit() else 0
        return group[min(max(i, 0), len(group) - 1)]

    # -- the request --------------------------------------------------------------------
    async def ask(
        self, *, temperature: float | None = None, seed: int | None = None, n: int = 1, view: str = "wide"
    ) -> PlanResult:
        """A plan (or, with n > 1, several) for the current prompt; answers a `need` once per cycle.
        `view`: "focused:K" asks about the Kth suspect alone when the mode has one ("value:J": the Jth
        value group), else the wide prompt is sent."""
        result = await self._ask(temperature, seed, n, view)
        if result.plan.need and not self.need_answered and self._suspect(view) is None:
            # two stages: the model asked to see definitions before it edits; answered once
            await self.answer_need(result.plan)
            result = await self._ask(temperature, seed, n, view)
        return result

    async def _ask(self, temperature: float | None, seed: int | None, n: int, view: str) -> PlanResult:
        paths = await asyncio.to_thread(self.edit_paths)  # stats files and reads check scripts
        symbols = self.symbols()
        suspect = self._suspect(view)
        group = suspect is not None and bool(suspect.get("read_by"))  # values alone, without their reader
        if suspect is not None and paths is not None:
            reads = [line.partition("\t")[::2] for line in lines_of(suspect.get("reads") or "")]
            if any(path not in paths for path, _ in reads):
                # a value it may not fix is not offered: the suspect is shown alone (a group: not at all)
                suspect = None if group else {**suspect, "reads": "", "values": ""}
            if suspect is not None and not group and suspect["path"] not in paths:
                suspect = None  # a file the act rules would not let it edit: the wide prompt instead
        if suspect is not None:  # that prompt shows one definition (a plan may rewrite it alone, or a
            # value it reads) or one definition's values (a plan may rewrite one of them)
            symbols = {} if group else {suspect["path"]: (suspect["symbol"],)}
            for line in lines_of(suspect.get("reads") or ""):
                path, _, name = line.partition("\t")
                symbols[path] = (*symbols.get(path, ()), name)
            paths = tuple(symbols) if paths is not None else None
        context = await self.fit(suspect if suspect is not None else self.context)
        pointed = view.startswith("pointed:") and suspect is not None
        request = PlanRequest(
            mode=self.mode.name,
            event=self.event,
            messages=self.messages_for(context, pointed=pointed),
            context={**context, "attempts": [a.as_dict() for a in self.attempts]},
            paths=paths,
            temperature=temperature,
            symbols=symbols,
            seed=seed,
            form=self.form,
            stop=tuple(self.mode.stop),
            n=n,
            record=self.record,
            watch=self._watch(suspect, context) if self.form == "code" and not group else None,
            point_lines=POINTED_LINES if pointed else PlanRequest.point_lines,
        )
        breaker = self.breaker
        try:
            result = await self.plan_fitting(request, context)
        except CycleError as exc:
            for key, spent in (exc.tokens or {}).items():  # a failed plan's tokens are spent all the same
                self.r.tokens[key] += spent
            if breaker is not None and isinstance(exc, LLMUnavailable):
                breaker.failure()
            raise
        if breaker is not None:
            breaker.success()
        if suspect is not None and result.named and result.plan.echoed:  # named, and changed nothing
            self.echoed.setdefault(_key(suspect), []).append(result.named)
        self.r.tokens["prompt"] += result.tokens.prompt
        self.r.tokens["completion"] += result.tokens.completion
        log.info("plan.planned", summary=result.plan.summary[:300], edits=len(result.plan.edits),
                 tokens=result.tokens.total, choices=result.choices, seed=seed, temperature=temperature,
                 view=view)
        if self.record is not None:
            for i, plan in enumerate([result.plan, *result.alternatives]):
                self.record({"kind": "plan", "choice": i, "seed": seed, "temperature": temperature,
                             "view": view, "plan": plan.model_dump(exclude_defaults=True)})
            for reason in result.invalid:
                self.record({"kind": "invalid", "seed": seed, "reason": reason})
        return result

    def _watch(self, suspect: dict[str, str] | None, context: dict[str, str]) -> Watched | None:
        watch = watched(suspect, context)
        if watch is not None and logs.redact_secrets(watch.code) != watch.code:
            # its text would leave unredacted as the reply's start, leg two's and leg one's grammar: the
            # reply is read whole from the redacted prompt instead
            return None
        tried = self.echoed.get(_key(suspect)) if suspect is not None else None
        return dataclasses.replace(watch, tried=tuple(tried)) if watch is not None and tried else watch

    def messages_for(self, context: dict[str, str], *, pointed: bool = False) -> list[dict[str, str]]:
        """The mode's messages for `context`; `pointed`: with the question a suspect is asked again after a
        reply that changed nothing (autod.candidates.reask)."""
        messages = [*self.mode.messages(self.event, context, self.attempts), *self.extra_messages]
        if pointed and context.get("symbol") and not context.get("read_by"):
            messages = pointed_messages(messages, context)
        # the last line of defence: no configured secret value leaves in a prompt
        return [
            {**m, "content": logs.redact_secrets(m["content"])} if isinstance(m.get("content"), str) else m
            for m in messages
        ]

    # -- what a plan may name -----------------------------------------------------------
    def edit_paths(self) -> tuple[str, ...] | None:
        """The files the prompt showed (so far: a `need` answer adds some) that a plan may edit.

        None leaves `path` free: a mode that writes no code, or a context that showed no file.
        """
        if not self.mode.writes_code or not self.editable:
            return None
        judges = Judges.for_settings(self.settings, self.mode.name)
        paths = editable_paths(self.editable, self.boundary, judges)
        return paths or None

    def symbols(self) -> dict[str, tuple[str, ...]] | None:
        """path -> the definitions the prompt showed whole there (a whole-definition edit names one)."""
        if not self.mode.writes_code:
            return None
        out: dict[str, list[str]] = {}
        for e in self.r.context:
            path, symbol, lines = e.get("path"), e.get("symbol"), str(e.get("lines") or "")
            whole = "-" in lines and not e.get("part_of")  # a window of a long one is not offered
            if path and symbol and whole and symbol not in out.get(path, []):
                out.setdefault(str(path), []).append(str(symbol))
        return {p: tuple(v) for p, v in out.items()} or None

    # -- the need round -----------------------------------------------------------------
    async def answer_need(self, plan: Plan) -> None:
        from autod.localize.need import answer_need

        self.need_answered = True
        budget = int(self.settings.localize.budget_tokens * 0.5)
        answer = await answer_need(self.settings, self.boundary, plan.need, budget)
        self.r.context += answer.entries
        if self.editable is not None:  # what the model asked to see, it may edit
            self.editable += [str(e["path"]) for e in answer.entries if e.get("path")]
        log.info("localize.need_answered", asked=len(plan.need), shown=len(answer.entries))
        if self.form == "code":
            asked = f"{plan.summary}\nNEED: {', '.join(plan.need)}"
        else:
            asked = json.dumps(plan.model_dump(include={"summary", "need"}))
        self.extra_messages = [
            {"role": "assistant", "content": asked},
            {"role": "user", "content": render("need_answer", definitions=answer.text or "(nothing found)",
                                               then=FORMS[self.form].need_then)},
        ]

    # -- the server's context -----------------------------------------------------------
    async def fit(self, context: dict[str, str]) -> dict[str, str]:
        """The context, cut by rank before sending when the whole prompt would not fit the server's window."""
        planner = self.planner
        if not isinstance(planner, ServerPlanner):  # the offline planner: no window to fit
            return context
        window = await _window(planner)
        if window is None:
            return context
        reply = planner.reply_tokens(self.mode.name)
        ratio = planner.chars_per_token or CHARS_PER_TOKEN
        room = window - reply - TEMPLATE_TOKENS
        messages = self.messages_for(context)
        size = estimated_tokens(messages, ratio)
        if size <= room:
            return context
        sections = sum(tokens(v) for v in context.values() if v)
        fixed = size - sum(len(v) for v in context.values() if v) / ratio  # template, attempts, need
        keep = max(200, int((room - fixed) * ratio / 4))  # in the 4-characters tokens pack() counts
        smaller = pack(list(context.items()), min(keep, sections))
        log.info("cycle.context_fitted", window=window, reply_tokens=reply, estimated_tokens=int(size),
                 budget_tokens=keep)
        return smaller

    async def plan_fitting(self, request: PlanRequest, context: dict[str, str]) -> PlanResult:
        """Ask the planner; a prompt over the model's context is asked once more with less context."""
        try:
            return await self.planner.plan(request)
        except ContextTooLong as exc:
            # Not an outage (the breaker is left alone): cut the lowest-ranked context to fit.
            budget = int(sum(tokens(v) for v in context.values() if v) * exc.fit())
            smaller = pack(list(context.items()), budget)
            if smaller == context:
                raise
            log.warning("cycle.context_shrunk", reason=exc.reason[:300], budget_tokens=budget)
            smaller_request = dataclasses.replace(request, messages=self.messages_for(smaller))
            return await self.planner.plan(smaller_request)


def _key(suspect: dict[str, str]) -> tuple[str, str]:
    return suspect.get("path", ""), suspect.get("symbol", "")


async def _window(planner: ServerPlanner) -> int | None:
    try:
        return await planner.context_window()
    except Exception as exc:  # a probe that fails tells nothing: budget as configured
        log.debug("llm.context_size_unknown", error=type(exc).__name__)
        return None


def watched(suspect: dict[str, str] | None, shown: dict[str, str]) -> Watched | None:
    """The definition a suspect's prompt asks back, for its reply to be ended once the rest cannot change
    the fix (autod.planner.earlystop): as the file has it (nothing cut to fit the window). A reply that
    opens with a value's fixed assignment instead is not that definition's and is read whole; one that
    gives the definition back unchanged is an echo even if a value's block would have followed it (the
    values are asked about on their own, autod.localize.focus.value_suspects)."""
    code = shown.get("code") or ""
    if suspect is None or not code or code != suspect.get("code"):
        return None
    ran_to = suspect.get("ran_to") or ""
    # the lines the failing tests ran, and the one after them (an insertion there would run too)
    return Watched(code, int(ran_to) + 1 if ran_to.isdigit() and int(ran_to) > 0 else 0)
