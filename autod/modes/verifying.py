"""Which checks verify a candidate of a fixing mode, in what order, and what the judge is told.

The failing check runs first: when it already says the candidate lost, no other check runs. Then every
other configured check that passed before the candidate (the daemon's last run of it, as the cycle
found it) runs too, so a fix that breaks something else is never kept; a check whose `covers` globs
match none of the candidate's files is skipped. Checks that were failing for another reason are not
the candidate's to mend and are left out. The judge (autod.checks.outcome.decide) compares each run
with that check's run before the candidate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import structlog

from autod.checks.outcome import Before, Decision, changed_sources, decide, failing_tests
from autod.checks.pertest import CANDIDATE_FILES
from autod.checks.run import CheckResult
from autod.config.models import CheckConfig
from autod.events import Event
from autod.modes import ModeEnv, Verification
from autod.plan import Plan
from autod.safety.boundary import glob_match
from autod.verdict import Status

__all__ = ["checks_for", "unjournaled", "verify_by_checks"]

log = structlog.get_logger("autod.modes.verifying")


def checks_for(
    configured: Mapping[str, CheckConfig], failing: object, plan: Plan, runs: Mapping[str, CheckResult]
) -> list[str]:
    """The checks to run, the failing one first (pure)."""
    names: list[str] = []
    target = isinstance(failing, str) and failing in configured and not configured[failing].fixer
    if target:
        names.append(str(failing))
    touched = [e.path for e in plan.edits]
    for name, check in configured.items():
        if name in names or check.fixer:
            continue
        prior = runs.get(name)
        if prior is None:
            if name in plan.verify:  # never run: judged when the plan names it
                names.append(name)
            continue
        if not prior.ok or prior.error:
            # failing: judged only when the plan names it and the event names no failing check (a
            # manual request); another check's failure is not this candidate's to mend
            if name in plan.verify and not target:
                names.append(name)
            continue
        if check.covers and touched and not any(glob_match(g, p) for g in check.covers for p in touched):
            continue
        names.append(name)
    if not target and not any(n in plan.verify for n in names):
        # nothing names what the plan fixes: every check judges it
        names += [n for n, c in configured.items() if not c.fixer and n not in names]
    return names


async def verify_by_checks(event: Event, plan: Plan, env: ModeEnv) -> Verification:
    """Run the checks that judge `plan` (focus commands first) and let the judge decide. Its files may
    not reach into the runner while they run (autod.checks.judge_reach)."""
    token = CANDIDATE_FILES.set(tuple(sorted({e.path for e in plan.edits})))
    try:
        return await _verify(event, plan, env)
    finally:
        CANDIDATE_FILES.reset(token)


async def _verify(event: Event, plan: Plan, env: ModeEnv) -> Verification:
    runs = dict(env.last_results)
    names = checks_for(env.settings.checks, event.payload.get("check"), plan, runs)
    if not names:
        return Verification(Status.ROLLED_BACK, reason=decide([], Before(1)).reason)
    for n in names:
        focus = env.settings.checks[n].focus
        if not focus:
            continue
        quick = dataclasses.replace(await env.run_check(n, run=focus), name=f"{n}:focus")
        if not quick.ok:
            # a failing focus settles it: the full check would only take longer to say so
            d = decide([], Before(1), focus=quick)
            return Verification(d.status, [quick], d.reason)
    before = before_of(event, runs)
    results: list[CheckResult] = []
    d: Decision | None = None
    for n in names:
        results.append(await env.run_check(n))
        d = decide(results, before)
        if d.status is Status.ROLLED_BACK:
            break  # the candidate lost: the other checks would only take longer to say so
    assert d is not None
    return Verification(d.status, results, d.reason)


def before_of(event: Event, runs: Mapping[str, CheckResult]) -> Before:
    """What the judge compares with: the failure the event describes and each check's last run."""
    payload = event.payload
    known = payload.get("failing_tests")
    tests: frozenset[str] | None = (
        frozenset(str(t) for t in known) if isinstance(known, list) and known else None
    )
    tests = tests or failing_tests(str(payload.get("excerpt", "")))
    return Before(int(payload.get("failures") or 1), tests, runs)


def unjournaled(verification: Verification) -> Verification:
    """A kept verification whose checks changed the workspace's source fails (autod.checks.outcome's
    rule, for the modes whose own verification does not apply it); the files stay as the check left
    them (logged)."""
    if verification.status not in ("fixed", "improved", "no_change"):
        return verification
    d = changed_sources(verification.checks, verification.status)
    if d is None:
        return verification
    changed = sorted({path for c in verification.checks for path in c.changed})
    who = ", ".join(c.name for c in verification.checks if c.changed)
    log.warning("check.changed_files_in_verification", checks=who, files=changed[:50], count=len(changed),
                verdict_before=verification.status)
    return Verification(d.status, verification.checks, d.reason)
