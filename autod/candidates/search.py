"""Several plans per attempt; keep those that apply and parse; verify them; pick the winner.

One attempt draws up to `candidates.n` plans for the same prompt: the first at temperature 0, the
rest sampled at `candidates.temperature`, in one request with `n` where the server takes it and one by
one where it does not (the identical prompt is served from the server's prompt cache). Before them, in
a cycle's first attempt, each suspect definition (autod.localize.focus) is asked about alone
at most `candidates.focused` times, and each value group (the values one suspect reads) once, in the
order of the likeliest fix per second of model time given that the draws before missed (Blackwell's
rule, autod.candidates.order; a suspect's sampled draws follow one another, its prompt in the
server's cache). Each draw carries an explicit seed, `seed + i` for the
ith draw of its prompt in the cycle, so a bench is reproducible and a draw added to one prompt moves no
other's samples. A suspect whose greedy reply gave its code back is asked again another way before
its samples (autod.candidates.reask). Drawing is lazy: the next plan is asked for only when the ones
before did not fix the failure; none starts past the cycle's deadline (autod.candidates.clock), nor,
after the cycle's first draw, one expected to run past it (autod.candidates.fits).
Before any draw, a fix memory holds for this failure (autod.candidates.replay) is tried as a
candidate of its own (view "replay"), with no model call.

Each plan goes through the act rules (`prepare`: confinement, deny globs, judges, scope, the Python
parse, caps) without writing anything; it is dropped when refused, when it changes nothing, or when it
makes the same change as one already tried this cycle (compared by the AST of the files it produces,
so formatting differences do not count; a duplicate is a vote for the first). What is left is verified
by the `Validator`: on the workspace's mirror (autod.isolation) when it can be, else in place through
the journal. The first candidate that fixes everything wins at once; otherwise the best improvement
(fixed beats improved; ties by votes, then by the smaller diff). Every candidate is in the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import structlog

from autod.act.edits import FileChange
from autod.candidates import order
from autod.candidates.candidate import AttemptResult, Candidate, Drawer, FocusedDrawer, Validator
from autod.candidates.clock import DrawProgress, progress
from autod.candidates.compare import SAME_CODE, change_key, same_code, symptom_patch
from autod.candidates.fits import expected_ms, in_time
from autod.candidates.parts import parts
from autod.candidates.reask import echoed, reask
from autod.candidates.replans import Planned, log_plan, replan_rest
from autod.candidates.replay import Replay
from autod.config.settings import CandidatesConfig
from autod.errors import BudgetExhausted, CycleError, PlanInvalid, PlanRejected
from autod.plan import Plan

__all__ = ["AttemptResult", "Candidate", "CandidateSearch", "Drawer", "Validator"]

log = structlog.get_logger("autod.candidates")

KEPT = ("fixed", "improved")
DUPLICATE_WARMING = 0.25  # temperature added to the next draws for each duplicate in the attempt
NOTHING_NEW = ("duplicate", "unchanged")  # a change already tried, or the code as it is
MAX_TEMPERATURE = 1.3
RETRY_SEEDS = 1000  # seeds a cycle may use per prompt (a later cycle on the same failure starts past them)
Prepare = Callable[[Plan], Awaitable[tuple[list[FileChange], str]]]


class CandidateSearch:
    """The candidates of one cycle, attempt by attempt (duplicates are refused across attempts)."""

    def __init__(
        self,
        cfg: CandidatesConfig,
        drawer: Drawer | None,
        prepare: Prepare,
        validator: Validator,
        *,
        tokens_left: Callable[[], Awaitable[bool]] | None = None,
        record: Callable[[dict[str, Any]], None] | None = None,
        phase: Callable[[str], AbstractAsyncContextManager[None]] | None = None,
        judged_by_behaviour: bool = False,
        retry: int = 0,
        deadline: float | None = None,
        replays: Sequence[Replay] = (),
    ) -> None:
        """`judged_by_behaviour` (modes that fix a failure): a candidate whose Python files parse to
        the same code as before (only quotes, spacing or comments differ) is `unchanged` without a
        check run; one that writes a literal where a function used a workspace constant is a
        `suspect` (autod.act.inlined): verified like any other, but a fix of that kind does not end
        the search, and it wins only when no other candidate fixes everything.

        `retry`: how many cycles on the same failure came before this one without fixing it. Those
        asked the same questions: at temperature 0 a prompt's reply would be theirs again, and so
        would a sampled one with the same seed. So a later cycle's first attempt samples every
        prompt from its first draw, and every prompt's seeds go on past the earlier cycles'
        (`RETRY_SEEDS` a cycle).

        `replays`: fixes memory holds for this failure, tried before the first draw (no model call)."""
        self.judged_by_behaviour = judged_by_behaviour
        self.deadline, self._left = deadline, 0  # time.monotonic(); the attempt's draws not yet made
        self.retry = max(0, retry)
        self.phase = phase or (lambda _name: contextlib.nullcontext())  # type: ignore[return-value,arg-type]
        self.cfg = cfg
        self.drawer = drawer
        self.prepare = prepare
        self.validator = validator
        self.tokens_left = tokens_left
        self.record = record
        self.all: list[Candidate] = []
        self._seen: dict[str, Candidate] = {}
        self._takes_n: bool | None = None
        self._seeds: dict[str, int] = {}  # view -> its draws so far this cycle (the next one's seed offset)
        self.replays = list(replays)
        # the first attempt's plan when its sizes are known (sizes, per, n, whether its first looks are
        # greedy): planned again after each suspect's first draw (autod.candidates.order.replan)
        self._planned: Planned | None = None
        self._last = ""  # the view of the cycle's last draw ("": none yet), whose prompt the server holds
        self._expected: int | None = None  # the ms the draw being made is expected to take (fits.expected_ms)

    def views(self, number: int = 1) -> list[tuple[str, bool]]:
        """(view, at temperature 0) of each of attempt `number`'s draws, in order.

        The cycle's first attempt asks about the suspects alone ("focused:K", the Kth-ranked), at most
        `candidates.focused` times each (the first at temperature 0), each value group ("value:J", the
        drawer's `value_suspects`) once at temperature 0, and the wide prompt n times, in Blackwell's
        order (autod.candidates.order): next the draw of highest odds x detection / cost given that the
        draws before it missed, so a short suspect of low rank comes before a long one's samples, and
        a focused draw worth less than the wide prompt's last is not made. A drawer that does not tell
        the draws' sizes gets the fixed order: every suspect's first draw in rank order, the value
        groups, each suspect's sampled draws, the wide prompt's.

        Every attempt then draws n from the wide prompt, the first at temperature 0 (its prompt tells
        the attempts so far; the suspects' prompts do not, so a later attempt does not ask them again)."""
        focused = self.drawer if isinstance(self.drawer, FocusedDrawer) and self.drawer.has_focus else None
        per = self.cfg.focused if focused is not None else 0
        # a later cycle on the same failure asks its first attempt's prompts as the earlier ones did
        # (the wide one too, when they left no attempt to tell): sampled from the first draw on
        first = not self.retry or number > 1
        if focused is not None and per and number == 1:
            suspects, values = max(1, focused.suspects), focused.value_suspects
            s_sizes, v_sizes, wide = focused.suspect_sizes, focused.value_sizes, focused.wide_tokens
            if len(s_sizes) >= suspects and len(v_sizes) >= values and wide > 0:
                written = list(getattr(focused, "suspect_replies", None) or ())[:suspects]  # of each
                sizes = order.Sizes(s_sizes[:suspects], v_sizes[:values], wide, order.ratio_of(self.drawer),
                                    written)
                looks = order.plan(sizes, per, self.cfg.n)
                self._planned = (sizes, per, self.cfg.n, first)
            else:  # the sizes not known
                looks = order.fixed_order(suspects, values, per, self.cfg.n)
            return [(view, first and greedy) for view, greedy in looks]
        return [("wide", first and i == 0) for i in range(self.cfg.n)]

    async def attempt(self, number: int) -> AttemptResult:
        """Draw and verify up to n candidates; stop at the first that fixes everything."""
        result = AttemptResult([])
        # fixes memory holds, first: judged like any plan, verified on the mirror only, no model call
        for replay in self.replays if number == 1 and not self.validator.in_place else ():
            c = self._new(number, None, 0.0, 0, 0, "replay")
            c.plan, c.replay_of = replay.plan, replay.episode
            result.candidates.append(c)
            done = await self._judge(c, result)
            self._note(c)
            if done:
                return result
        views = self.views(number) if self.drawer is not None else []  # no prompt yet: replays alone
        if number == 1 and views:  # the plan, as a bench fitting the order reads it (`*`: at temperature 0)
            log_plan(views, order.ratio_of(self.drawer), self._planned)
        drawn = 0
        # a sampled draw that proposes nothing new (no edit: an echo of the prompt, prose alone; the
        # code copied back as it is; a change already tried) tells nothing about the fixes near the
        # first one: it does not use up one of its prompt's draws (as many such as the prompt has
        # draws in the attempt, at most)
        idle: dict[str, int] = {}
        looked: list[order.Done] = []  # the draws counted so far, for the plan's rest
        while drawn < len(views):
            self._left = len(views) - drawn
            if self.deadline is not None and not in_time(views, drawn, self._planned, self.drawer, self._last,
                                                         self.deadline):
                result.out_of_time = True  # past the deadline, or no draw left that would finish before it
                break
            if drawn and self.tokens_left is not None and not await self.tokens_left():
                log.info("candidates.budget_spent", drawn=drawn)
                break
            view, first = views[drawn]
            # the sampled draws of this view that follow one another: asked in one request, unless the
            # drawer asks a suspect's one choice a request (watched replies: Asker.one_choice)
            same = next((j for j, v in enumerate(views[drawn:]) if v != (view, False)), len(views) - drawn)
            single = view != "wide" and getattr(self.drawer, "one_choice", False) is True
            want = 1 if first or single or self._takes_n is False else max(1, same)
            # a draw that repeats a tried change (or the code as it is) says the model's distribution
            # for this prompt is too peaked to explore at this temperature: its next draws are sampled
            # warmer (a little, capped)
            dups = sum(c.outcome in NOTHING_NEW for c in result.candidates if c.view == view)
            temperature = 0.0 if first else min(self.cfg.temperature + DUPLICATE_WARMING * dups,
                                                max(self.cfg.temperature, MAX_TEMPERATURE))
            # the ith draw of a prompt: seed + i (past the earlier cycles' on the same failure)
            seed = (self.cfg.seed + self.retry * RETRY_SEEDS + self._seeds.get(view, 0)) % 2**31
            redraws, idle_before = sum(1 for v in views if v[0] == view), sum(idle.values())
            self._expected = expected_ms(self._planned, self.drawer, self._last, view)
            plans, spent, invalid, ms, (reply, ended) = await self._draw(
                temperature, seed, want, first=drawn == 0, view=view)
            self._last = view
            if want > 1 and len(plans) + len(invalid) < want:
                self._takes_n = False  # the server gave fewer choices than asked: one by one from now
            elif want > 1:
                self._takes_n = True
            count = max(1, len(plans) + len(invalid))
            self._seeds[view] = self._seeds.get(view, 0) + count
            share, ms = spent // count, ms // count
            for i, reason in enumerate(invalid):
                c = self._new(number, seed + i, temperature, share, ms, view)
                c.outcome, c.reason, c.reply_tokens = "invalid", reason, reply // count
                result.candidates.append(c)
                self._note(c, record=False)  # the asker recorded why it is invalid
            drawn += len(invalid)
            looked += [(view, None)] * len(invalid)
            for i, plan in enumerate(plans, len(invalid)):
                if view.startswith("value:") and await self._parts(plan, number, seed + i, view, result):
                    return result
                c = self._new(number, seed + i, temperature, share, ms, view)
                c.plan, c.reply_tokens, c.ended = plan, reply // count, ended
                result.candidates.append(c)
                if temperature > 0 and not plan.edits and not plan.report and idle.get(view, 0) < redraws:
                    idle[view] = idle.get(view, 0) + 1
                    c.outcome, c.reason = "no_change", plan.summary[:300]
                    log.info("candidates.redraw", n=c.n, why="the draw proposed no edit")
                    self._note(c)
                    continue
                done = await self._judge(c, result)
                self._note(c)
                if done:
                    return result
                gave_back = echoed(c.outcome, c.plan)
                if first and not self._replan(views, drawn + 1, [*looked, (view, gave_back)], idle, view,
                                              gave_back):
                    # a greedy reply that changed nothing: asked again another way, not sampled
                    reask(views, drawn, view, gave_back)
                if temperature > 0 and c.outcome in NOTHING_NEW and idle.get(view, 0) < redraws:
                    idle[view] = idle.get(view, 0) + 1
                    log.info("candidates.redraw", n=c.n, why=f"the draw proposed nothing new ({c.outcome})")
                else:
                    drawn += 1
                    looked.append((view, gave_back))
            if sum(idle.values()) > idle_before:  # how often its samples propose nothing new: priced anew
                self._replan(views, drawn, looked, idle, view, None)
            log.info("candidates.progress", what=(p := self.progress()).line(), **p.as_dict())
            if not plans and not invalid:  # nothing drawn: an outage, the budget, the deadline in flight
                result.out_of_time = self.deadline is not None and time.monotonic() >= self.deadline
                break
        kept = [c for c in result.candidates if c.outcome in KEPT]
        if kept and not self.validator.in_place:
            result.winner = min(kept, key=lambda c: (c.outcome != "fixed", bool(c.suspect), -c.votes,
                                                     c.diff_lines, c.n))
        return result

    def _replan(self, views: list[tuple[str, bool]], start: int, looked: list[order.Done],
                idle: dict[str, int], after: str, echoed: bool | None) -> bool:
        """The first attempt's plan from `views[start]` on made again (autod.candidates.replans) after a
        suspect's draw `after`. False: no plan to make again (the fixed order, a later attempt, a draw
        that is not a suspect's)."""
        if self._planned is None or not after.startswith("focused:"):
            return False
        replan_rest(self._planned, order.ratio_of(self.drawer), views, start, looked, idle, after, echoed)
        return True

    def progress(self) -> DrawProgress:
        """Draws done and planned, model time, an estimate: for `autod status` and the log."""
        return progress(self.all, self._left, self.deadline)

    def _new(self, attempt: int, seed: int, temperature: float, tokens: int, ms: int, view: str) -> Candidate:
        c = Candidate(len(self.all) + 1, attempt, seed, temperature, tokens=tokens, model_ms=ms, view=view,
                      expected_ms=self._expected if view != "replay" else None)
        self.all.append(c)
        return c

    async def _draw(
        self, temperature: float, seed: int, n: int, *, first: bool, view: str
    ) -> tuple[list[Plan], int, list[str], int, tuple[int, str]]:
        """(valid plans, tokens spent, reasons of invalid ones, model ms, (tokens generated, why the reply
        was ended early)) of one request."""
        started = time.monotonic()
        left = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        try:
            assert self.drawer is not None, "a draw needs a prompt"
            async with self.phase("plan"), asyncio.timeout(left) as limit:  # a draw writes nothing
                if view == "wide":  # a drawer without views is asked as before
                    res = await self.drawer.ask(temperature=temperature, seed=seed, n=n)
                else:
                    res = await self.drawer.ask(temperature=temperature, seed=seed, n=n, view=view)
        except PlanInvalid as exc:
            spent = sum((exc.tokens or {}).values())
            return [], spent, [exc.reason], _ms(started), ((exc.tokens or {}).get("completion", 0), "")
        except TimeoutError:
            if not limit.expired():
                raise
            log.info("candidates.deadline", view=view, why="the draw in flight passed the cycle's deadline")
            return [], 0, [], _ms(started), (0, "")
        except BudgetExhausted:
            if first and not self.all:
                raise
            return [], 0, [], _ms(started), (0, "")
        except CycleError:
            if self.all and not first:
                return [], 0, [], _ms(started), (0, "")  # keep what was drawn; the outage shows next cycle
            raise
        return ([res.plan, *res.alternatives], res.tokens.total, list(res.invalid), _ms(started),
                (res.tokens.completion, res.ended))

    async def _parts(self, plan: Plan, number: int, seed: int, view: str, result: AttemptResult) -> bool:
        """Each edit of a value group's reply alone, before the reply whole (autod.candidates.parts):
        candidates of their own, not draws (no model time, no tokens). True: one ended the search."""
        for part in parts(plan):
            c = self._new(number, seed, 0.0, 0, 0, view)
            c.plan, c.part, c.expected_ms = part, True, None  # no draw of its own
            result.candidates.append(c)
            done = await self._judge(c, result)
            self._note(c)
            if done:
                return True
        return False

    async def _judge(self, c: Candidate, result: AttemptResult) -> bool:
        """Filter and verify one candidate. True: the search is over (fixed, or kept/proposed in place)."""
        assert c.plan is not None
        if not c.plan.edits:
            c.outcome, c.reason = "no_change", c.plan.summary[:300]
            return False
        try:
            async with self.phase("act"):
                c.changes, c.diff = await self.prepare(c.plan)
        except PlanRejected as exc:
            c.outcome, c.reason = "refused", exc.reason
            return False
        except (CycleError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug of autod's on this plan: log it, drop the plan, go on
            log.exception("candidates.prepare_crashed", n=c.n)
            c.outcome, c.reason = "refused", f"internal error while applying the plan ({type(exc).__name__})"
            return False
        if not c.changes:  # e.g. a definition rewritten exactly as it is
            c.outcome, c.reason = "unchanged", "the edits change nothing: the code is already like that"
            return False
        # parsing and reading other files happen in a worker thread, never on the event loop
        if self.judged_by_behaviour and await asyncio.to_thread(lambda: all(map(same_code, c.changes))):
            c.outcome, c.reason = "unchanged", SAME_CODE
            return False
        c.key = change_key(c.changes)
        seen = self._seen.get(c.key)
        if seen is not None:
            seen.votes += 1
            c.outcome, c.reason = "duplicate", f"the same change as candidate {seen.n} ({seen.outcome})"
            return False
        self._seen[c.key] = c
        if self.judged_by_behaviour and not self.validator.in_place:  # in place a fix is kept at once
            try:
                c.suspect = await asyncio.to_thread(symptom_patch, c.changes) or ""
            except Exception:  # a bug of autod's heuristic never costs the candidate
                log.exception("candidates.suspect_check_crashed", n=c.n)
        started = time.monotonic()
        if self.validator.in_place:  # the act step has a phase of its own
            verification = await self.validator.validate(c.plan, c.changes)
        else:
            async with self.phase("act"):
                verification = await self.validator.validate(c.plan, c.changes)
        c.checks_ms = _ms(started)
        if verification is None:
            c.outcome, result.proposed, result.winner = "proposed", True, c
            return True
        c.verification = verification
        c.outcome, c.reason = verification.status, verification.reason
        if self.validator.in_place and verification.status in (*KEPT, "no_change"):
            result.winner = c  # written and kept in the tree: no second candidate on top of it
            return True
        if verification.status == "partly_rolled_back":
            return True  # in place, a rollback left someone's save: nothing more over their work
        if verification.status == "fixed" and c.suspect:
            return False  # a fix, but maybe of the symptom: the other candidates are still drawn
        if verification.status == "fixed":
            result.winner = c
            return True
        return False

    def _note(self, c: Candidate, *, record: bool = True) -> None:
        # one line a draw, its cost and its outcome: what a bench fits a drawing policy on
        log.info("candidates.judged", n=c.n, attempt=c.attempt, outcome=c.outcome, seed=c.seed,
                 view=c.view, temperature=c.temperature, tokens=c.tokens, reply_tokens=c.reply_tokens,
                 ended=c.ended or None, model_s=c.model_ms / 1000,
                 checks_s=c.checks_ms / 1000, part=c.part, diff_lines=c.diff_lines,
                 reason=c.reason[:200] or None)
        if self.record is None or not record:
            return
        entry: dict[str, Any] = {"kind": "candidate", **c.record()}
        if c.outcome == "refused" and c.plan is not None:
            entry["edits"] = [e.model_dump(exclude_defaults=True) for e in c.plan.edits]  # the offending text
        if c.diff:
            entry["diff"] = c.diff[:20000]
        if c.verification is not None:
            entry["output"] = c.verification.output[-4000:]
        self.record(entry)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
