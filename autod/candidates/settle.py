"""An attempt none of whose candidates was kept: what the cycle's record says, and what the re-plan is
told. Pure over the attempt's candidates: the cycle applies the result (and writes a report plan's
report)."""

from __future__ import annotations

from dataclasses import dataclass, field

from autod.candidates.search import SAME_CODE, AttemptResult
from autod.modes import Attempt
from autod.plan import Plan
from autod.reflection import Reflection, after_earlier_attempts

FAILED_SHOWN = 2  # failed candidates of an attempt shown to the re-plan, the most voted first


@dataclass
class Settled:
    replan: bool  # worth another attempt
    told: list[Attempt] = field(default_factory=list)  # what the re-plan is told, in order
    last_diff: str | None = None  # the best failed candidate's diff (the record's episode)
    last_attempt: dict[str, str] | None = None  # ... as the fingerprint's last attempt
    report: Plan | None = None  # a plan without edits that has a report to write


def settle(found: AttemptResult, r: Reflection) -> Settled:
    """Set `r`'s status, reason and plan summary for an attempt that kept nothing; say what comes next."""
    tried = [c for c in found.candidates if c.plan is not None and c.outcome != "duplicate"]
    failed = [c for c in found.candidates if c.outcome in ("rolled_back", "partly_rolled_back")]
    refused = found.drawn("refused")
    if found.candidates and all(c.outcome == "duplicate" for c in found.candidates):
        # every plan repeated one already tried this cycle: never applied twice, the status stands
        again = "the re-plan repeated a candidate already tried"
        r.reason = f"{r.reason}; {again}" if r.reason else again
        return Settled(True)
    if failed:
        ranked = sorted(failed, key=lambda c: (-c.votes, c.diff_lines, c.n))
        best = ranked[0]
        assert best.plan is not None and best.verification is not None
        r.plan_summary = best.plan.summary
        r.status = "rolled_back"
        r.reason = f"no candidate passed the checks ({found.summary()}): {best.reason}"
        told = []
        for c in ranked[:FAILED_SHOWN]:  # two different wrong fixes tell more than one
            assert c.plan is not None and c.verification is not None
            told.append(Attempt(c.plan.summary, c.diff, c.verification.output))
        last = Attempt(best.plan.summary, best.diff, best.verification.output).as_dict()
        return Settled(True, told + unchanged(found), best.diff, last)
    if refused:
        r.plan_summary = refused[0].plan.summary if refused[0].plan else None
        r.status, r.reason = after_earlier_attempts(r, "rejected", f"{refused[0].reason} ({found.summary()})")
        told = [
            Attempt(c.plan.summary if c.plan else "", "", f"refused by autod's act rules: {c.reason}")
            for c in list({c.reason: c for c in refused}.values())[:3]  # each distinct reason once
        ]
        return Settled(True, told)
    if found.drawn("unchanged"):  # rewrote code as it already is: say so, and ask again
        c = found.drawn("unchanged")[0]
        r.plan_summary = c.plan.summary if c.plan else None
        why = f"the edits change nothing ({found.summary()})"
        r.status, r.reason = after_earlier_attempts(r, "no_change", why)
        return Settled(True, unchanged(found))
    if tried:  # only plans without edits: the model has no fix (it may have a report)
        plan = tried[0].plan
        r.plan_summary = plan.summary if plan else None
        r.status, r.reason = after_earlier_attempts(r, "no_change", "the planner proposed no edits")
        return Settled(False, report=plan if plan is not None and plan.report else None)
    if found.candidates:  # only invalid replies
        invalid = found.drawn("invalid")
        why = invalid[0].reason if invalid else ""
        reason = f"no valid plan in {len(invalid)} replies: {why}"
        r.status, r.reason = after_earlier_attempts(r, "rejected", reason)
        return Settled(True, [Attempt("(no valid plan)", "", f"the reply was not a valid JSON plan: {why}")])
    return Settled(False)


def unchanged(found: AttemptResult) -> list[Attempt]:
    """The re-plan hears which rewrites changed nothing (a small model keeps rewriting correct code)."""
    same = found.drawn("unchanged")
    if not same:
        return []
    where = ", ".join(dict.fromkeys(e.symbol or e.path for x in same if x.plan for e in x.plan.edits))
    did = "changed nothing: the code is already exactly like that"
    if all(x.reason == SAME_CODE for x in same):
        did = "changed only quotes, spacing or comments: the code behaves exactly as before"
    why = (f"the edit of {where} {did}. The failure comes from code that differs from what the test"
           " expects; change that code")
    return [Attempt(same[0].plan.summary if same[0].plan else "", "", why)]
