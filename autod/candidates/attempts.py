"""Attempt after attempt of candidate search, until a fix is kept, held for a person, or nothing more is
worth asking. The cycle lends what only it can do (`Host`: write into the tree, store a proposal, write
a report, time a phase); this module decides which candidate goes into the tree and when to ask again."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

import structlog

from autod.candidates.clock import deadline_note
from autod.candidates.search import AttemptResult, Candidate, CandidateSearch
from autod.candidates.settle import settle
from autod.modes import Attempt, Verification
from autod.plan import Plan
from autod.reflection import after_earlier_attempts

if TYPE_CHECKING:
    from autod.candidates.validate import InPlace, Isolated
    from autod.reflection import Reflection

log = structlog.get_logger("autod.candidates.attempts")


class Host(Protocol):
    """What the cycle lends the attempt loop."""

    r: Reflection
    attempts: list[Attempt]  # what the next plan is told, in order
    last_attempt: dict[str, str] | None  # the fingerprint's last attempt, for the next cycle
    last_diff: str  # the diff of the last plan prepared (the record's episode)

    def phase(self, name: str) -> AbstractAsyncContextManager[None]: ...

    async def act(self, plan: Plan, *, hold: str = "") -> Verification | None:
        """Into the tree, verified there, kept or rolled back; None: stored as a proposal."""

    async def write_report(self, plan: Plan) -> None: ...

    def left_behind(self) -> list[str]:
        """Files a rollback left because someone else changed them after autod wrote them."""


async def run_attempts(host: Host, search: CandidateSearch, validator: InPlace | Isolated,
                       max_attempts: int) -> None:
    """Draw, verify and keep the winner attempt by attempt; the host's record says how it ended."""
    r = host.r
    fallback: Candidate | None = None  # a fix that may patch the symptom (candidates' `suspect`)
    attempt = 0
    while attempt < max_attempts:
        attempt += 1
        r.attempts += 1
        found = await search.attempt(attempt)
        r.candidates = [c.record() for c in search.all]
        r.refusals += [c.reason[:1000] for c in found.drawn("refused")]
        w = found.winner
        if found.proposed:
            return
        if w is not None and w.suspect and w.outcome == "fixed" and fallback is None and w.plan:
            # With this fix in hand, one more attempt is told why it may patch the symptom; when that
            # attempt finds nothing better the fix waits for `autod approve`, never lost.
            fallback, max_attempts = w, max(max_attempts, attempt + 1)
            host.attempts.append(Attempt(w.plan.summary, w.diff, w.suspect))
            log.info("candidates.suspect_fix", n=w.n, why=w.suspect[:300])
            continue
        if fallback is not None and (w is None or w.outcome != "fixed"):
            w = fallback
        if w is not None and w.plan is not None:
            if not await _keep(host, w, in_place=validator.in_place) or found.out_of_time:
                return
            continue
        if found.out_of_time:  # what the attempt found stands; no re-plan past the deadline
            _out_of_time(host, found, search)
            return
        if not await _nothing_kept(host, found):
            return


def _out_of_time(host: Host, found: AttemptResult, search: CandidateSearch) -> None:
    """The record of a cycle its deadline stopped with nothing kept: the reason names the deadline."""
    r, p = host.r, search.progress()
    note = deadline_note(search.cfg.max_cycle_minutes, p.done, p.planned)
    if any(c.plan is not None for c in found.candidates):
        settle(found, r)
        r.reason = f"{r.reason}; {note}" if r.reason else note
    else:
        r.status, r.reason = after_earlier_attempts(r, "failed", note)
    log.warning("candidates.out_of_time", status=r.status, reason=r.reason[:300])


async def replay_first(host: Host, search: CandidateSearch) -> bool:
    """The fixes memory holds for this failure (`search.replays`), verified on the mirror before any
    localization or model call: True when one fixed everything and the cycle is over (kept in the
    tree, or held for a person). What they did stays in the record, and the search goes on from them:
    a change tried is not tried again, one that fixed only in part is not kept alone."""
    if not search.replays or search.validator.in_place:
        return False
    found = await search.attempt(1)
    search.replays = []
    host.r.candidates = [c.record() for c in search.all]
    w = found.winner
    if w is None or w.plan is None or w.outcome != "fixed" or w.suspect:
        return False
    host.r.attempts = 1
    return not await _keep(host, w, in_place=False)  # rolled back in the tree: the search goes on


async def _keep(host: Host, w: Candidate, *, in_place: bool) -> bool:
    """The winner into the tree (or held as a proposal); True when it rolled back there and a re-plan,
    told why, is worth it."""
    r = host.r
    assert w.plan is not None
    r.plan_summary = w.plan.summary
    if in_place:  # already written, verified and kept by the act step
        assert w.verification is not None
        r.status, r.reason = w.verification.status, w.verification.reason or None
        return False
    # a suspect fix (nothing better found) is held for a person: kept as a proposal, the tree untouched,
    # never lost
    hold = f"a fix that may patch the symptom: {w.suspect}" if w.suspect else ""
    async with host.phase("act"):
        verification = await host.act(w.plan, hold=hold)  # into the tree, verified there
    if verification is None:  # stored as a proposal (verified on the mirror)
        r.reason = f"verified on a copy of the workspace: {w.outcome}; {r.reason or ''}"
        return False
    r.status, r.reason = verification.status, verification.reason or None
    if verification.status != "rolled_back" or host.left_behind():
        return False  # a file someone else changed meanwhile: no second attempt over their work
    host.attempts.append(Attempt(w.plan.summary, host.last_diff, verification.output))
    host.last_attempt = host.attempts[-1].as_dict()
    return True


async def _nothing_kept(host: Host, found: AttemptResult) -> bool:
    """No candidate of the attempt was kept: the record says why; True when a re-plan is worth it."""
    if host.left_behind():  # a file someone else changed meanwhile: no second attempt over their work
        return False
    settled = settle(found, host.r)
    host.attempts += settled.told
    if settled.last_diff is not None:
        host.last_diff, host.last_attempt = settled.last_diff, settled.last_attempt
    if settled.report is not None:
        async with host.phase("act"):
            await host.write_report(settled.report)
    if settled.replan:
        log.info("plan.replanning", outcome=host.r.status, reason=(host.r.reason or "")[:300])
    return settled.replan
