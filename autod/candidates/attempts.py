"""Attempt after attempt of candidate search, until a fix is kept, held for a person, or nothing more is
worth asking. The cycle lends one callable (`IntoTree`: a plan into the working tree, verified there,
kept or rolled back, or held as a proposal) and the two values the loop writes: the cycle's record and
what its attempts told (`Tried`). This module decides which candidate goes into the tree and when to
ask again."""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from autod.candidates.candidate import IntoTree
from autod.candidates.clock import deadline_note
from autod.candidates.search import AttemptResult, Candidate, CandidateSearch
from autod.candidates.settle import settle
from autod.modes import Attempt
from autod.plan import Plan
from autod.reflection import Reflection, after_earlier_attempts

log = structlog.get_logger("autod.candidates.attempts")


@dataclass
class Tried:
    """What a cycle's attempts leave: what the next plan is told, and what the record keeps of them."""

    told: list[Attempt] = field(default_factory=list)  # what the next plan is told, in order
    last: dict[str, str] | None = None  # the fingerprint's last attempt, for the next cycle
    diff: str = ""  # the diff of the last plan tried (the record's episode)


def left_behind(r: Reflection) -> list[str]:
    """Files a rollback of the cycle left because someone else changed them after autod wrote them."""
    return list((r.rollback or {}).get("left") or [])


async def run_attempts(search: CandidateSearch, max_attempts: int, *, r: Reflection, tried: Tried,
                       into_tree: IntoTree) -> Plan | None:
    """Draw, verify and keep the winner attempt by attempt; `r` says how it ended. A plan without edits
    that has a report to write, when that is the end (the cycle writes the report)."""
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
            return None
        if w is not None and w.suspect and w.outcome == "fixed" and fallback is None and w.plan:
            # With this fix in hand, one more attempt is told why it may patch the symptom; when that
            # attempt finds nothing better the fix waits for `autod approve`, never lost.
            fallback, max_attempts = w, max(max_attempts, attempt + 1)
            tried.told.append(Attempt(w.plan.summary, w.diff, w.suspect))
            log.info("candidates.suspect_fix", n=w.n, why=w.suspect[:300])
            continue
        if fallback is not None and (w is None or w.outcome != "fixed"):
            w = fallback
        if w is not None and w.plan is not None:
            replan = await _keep(w, r, tried, into_tree, in_place=search.validator.in_place)
            if not replan or found.out_of_time:
                return None
            continue
        if found.out_of_time:  # what the attempt found stands; no re-plan past the deadline
            _out_of_time(found, search, r)
            return None
        if left_behind(r):  # a file someone else changed meanwhile: no second attempt over their work
            return None
        settled = settle(found, r)
        tried.told += settled.told
        if settled.last_diff is not None:
            tried.diff, tried.last = settled.last_diff, settled.last_attempt
        if settled.report is not None:
            return settled.report
        if not settled.replan:
            return None
        log.info("plan.replanning", outcome=r.status, reason=(r.reason or "")[:300])
    return None


def _out_of_time(found: AttemptResult, search: CandidateSearch, r: Reflection) -> None:
    """The record of a cycle its deadline stopped with nothing kept: the reason names the deadline."""
    p = search.progress()
    note = deadline_note(search.cfg.max_cycle_minutes, p.done, p.planned, p.deadline_in_s)
    if any(c.plan is not None for c in found.candidates):
        settle(found, r)
        r.reason = f"{r.reason}; {note}" if r.reason else note
    else:
        r.status, r.reason = after_earlier_attempts(r, "failed", note)
    log.warning("candidates.out_of_time", status=r.status, reason=r.reason[:300])


async def replay_first(search: CandidateSearch, *, r: Reflection, tried: Tried, into_tree: IntoTree) -> bool:
    """The fixes memory holds for this failure (`search.replays`), verified on the mirror before any
    localization or model call: True when one fixed everything and the cycle is over (kept in the
    tree, or held for a person). What they did stays in the record, and the search goes on from them:
    a change tried is not tried again, one that fixed only in part is not kept alone."""
    if not search.replays or search.validator.in_place:
        return False
    found = await search.attempt(1)
    search.replays = []
    r.candidates = [c.record() for c in search.all]
    w = found.winner
    if w is None or w.plan is None or w.outcome != "fixed" or w.suspect:
        return False
    r.attempts = 1
    return not await _keep(w, r, tried, into_tree, in_place=False)  # rolled back in the tree: it goes on


async def _keep(w: Candidate, r: Reflection, tried: Tried, into_tree: IntoTree, *, in_place: bool) -> bool:
    """The winner into the tree (or held as a proposal); True when it rolled back there and a re-plan,
    told why, is worth it."""
    assert w.plan is not None
    r.plan_summary = w.plan.summary
    if in_place:  # already written, verified and kept by the act phase
        assert w.verification is not None
        r.status, r.reason = w.verification.status, w.verification.reason or None
        return False
    # a suspect fix (nothing better found) is held for a person: kept as a proposal, the tree untouched,
    # never lost
    hold = f"a fix that may patch the symptom: {w.suspect}" if w.suspect else ""
    written = await into_tree(w.plan, hold=hold)  # into the tree, verified there
    if written is None:  # stored as a proposal (verified on the mirror)
        r.reason = f"verified on a copy of the workspace: {w.outcome}; {r.reason or ''}"
        return False
    v = written.verification
    r.status, r.reason = v.status, v.reason or None
    if v.status != "rolled_back" or written.left:
        return False  # a file someone else changed meanwhile: no second attempt over their work
    tried.told.append(Attempt(w.plan.summary, written.diff, v.output))
    tried.last = tried.told[-1].as_dict()
    return True
