"""The judge: what a verification's check runs say about a candidate. One pure function, `decide`.

A candidate is judged by what each test did, compared with the run before it, never by an exit code
alone. For every check it ran (autod.checks.pertest has the per-test report):

1. a focus command failed: `rolled_back` (the full check would only take longer to say so);
2. a check could not start: `rolled_back` (a check that cannot start proves nothing);
3. a pytest check that reported no results (the process ended before pytest could report: a
   `SystemExit` or `os._exit` at import, a crash) or had errors during collection: `rolled_back`; so
   is one whose test runner changed (a function or class of pytest, pluggy, unittest, builtins or the
   import system replaced, added or removed, or its code swapped: autod.checks.judge_plugin, which
   also counts a report pytest's own classes did not make) beyond the changes the
   check's run before the candidate showed (pytest and its plugins change themselves as they
   configure); without such a run, beyond changes to the runner's or installed plugins' own code;
4. per test, against the check's run before the candidate (or, without one, the tests the failure
   names): a test that failed before must now be reported **passed** (skipped, xfailed, deselected,
   errored or missing is not passed); no test that passed before may fail, skip or disappear; the
   tests collected may not be fewer; a test heard passing must have run what it ran before (its
   function and the origins of the names it reads, autod.checks.judge_path `ran`);
5. a check that passed before must still pass (every configured check, unless its `covers` globs
   say the candidate cannot touch what it judges);
6. then: every check passes and every failing test passes: `fixed`; fewer failing tests (or fewer
   failures counted by a summary the check printed) and nothing of 3-5 broken: `improved`;
   otherwise `rolled_back`.
Whatever 1-6 said, a check that changed the workspace's sources makes it `rolled_back` (its change is
in no journal: autod can neither take it back nor tell it from the fix). Files a check merely wrote
(ignored by git, or untracked output: `CheckResult.outputs`) do not count.

A check that is not pytest (a make target, a shell script, ruff) is judged by its exit code; pytest
started by such a check (`make test`) is heard too, and then judged per test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autod import fsnames
from autod.checks import renumbered
from autod.checks.pertest import FAILING, PerTestReport
from autod.checks.run import CheckResult
from autod.logs import redact_text
from autod.verdict import Status

__all__ = ["Before", "Decision", "Status", "broken", "changed_sources", "count_failures",
           "counted_failures", "decide", "failing_tests"]

_PYTEST_COUNTS = re.compile(r"(?<!\d)(\d++) (failed|errors?)\b")  # from a number's first digit only: linear
_PYTEST_SUMMARY = re.compile(
    r"(?<!=)=+ [^\n]{0,200}\b(passed|failed|errors?|skipped|no tests ran)\b[^\n]{0,200} in [\d.]+m?s", re.I
)
_PYTEST_BROKEN = re.compile(
    r"errors? during collection|^ERROR collecting |ImportError while loading conftest"
    r"|^INTERNALERROR>|^(?:ERROR: )?usage: |no tests ran in ",
    re.M,
)
PYTEST_BROKEN_EXITS = frozenset({2, 3, 4, 5})  # interrupted, internal error, usage error, no tests
_SHOWN = 5
_TAIL = 8000  # characters at the end of a run's output where pytest says it broke
_SUMMARY_TAIL = 4000  # characters at the end where its summary counts failures
_MAX_NAMED = 500  # failing test ids read from a summary


@dataclass(frozen=True)
class Before:
    """What the candidate is compared with: the failure (how many failed, which tests if known) and
    each check's last run before the candidate (`runs`, by check name)."""

    failures: int
    tests: frozenset[str] | None = None
    runs: Mapping[str, CheckResult] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    status: Status
    reason: str = ""


def decide(results: Sequence[CheckResult], before: Before, *, focus: CheckResult | None = None) -> Decision:
    """The verification's status from its check runs (see the module's rules)."""
    if focus is not None and not focus.ok:
        check = focus.name.split(":")[0]
        return Decision(Status.ROLLED_BACK, f"focus of check {check} failed; full check not run")
    if not results:
        return Decision(Status.ROLLED_BACK, "no configured check to verify the edits with")
    for r in results:
        if r.error:
            return Decision(Status.ROLLED_BACK, f"check {r.name} cannot start: {r.error}")
    verdicts = [_judge(r, before) for r in results]
    verdict = next((v for v in verdicts if v.status is Status.ROLLED_BACK), None)
    if verdict is None:
        improved = [v for v in verdicts if v.status is Status.IMPROVED]
        verdict = improved[0] if improved else Decision(Status.FIXED)
    return changed_sources(results, verdict.status) or verdict


def _judge(r: CheckResult, before: Before) -> Decision:
    """One check's run against its run before the candidate."""
    prior = before.runs.get(r.name)
    per_test = r.tests is not None or r.expects_tests or (prior is not None and prior.tests is not None)
    if per_test:
        return _by_tests(r, prior, before)
    if r.ok:
        return Decision(Status.FIXED)
    if prior is not None and prior.ok:
        why = f"check {r.name} passed before and now fails (exit {r.exit_code})"
        return Decision(Status.ROLLED_BACK, why)
    return _by_failures(r, before)


def _by_tests(r: CheckResult, prior: CheckResult | None, before: Before) -> Decision:
    after = r.tests
    if after is None:
        return Decision(Status.ROLLED_BACK, f"check {r.name} reported no test results (exit {r.exit_code}):"
                        " the run ended before pytest could report, which proves nothing")
    was = prior.tests if prior is not None else None
    if was is not None:  # tests pytest numbered by a set's order, which a process's addresses decide
        after = renumbered.align(was, after)
    reached = sorted(after.runner - was.runner if was is not None else after.foreign)
    if reached:
        return Decision(Status.ROLLED_BACK, f"check {r.name}: the test runner itself changed during the run"
                        f" ({_ids(reached)}), so what it reported cannot be trusted")
    new_errors = sorted(set(after.collect_errors) - set(was.collect_errors if was else ()))
    if new_errors:
        why = f"check {r.name} had errors during collection: {_ids(new_errors)}"
        return Decision(Status.ROLLED_BACK, why)
    if was is not None:
        gone = sorted(was.seen - after.seen)
        if gone:
            return Decision(Status.ROLLED_BACK, f"check {r.name} no longer runs {len(gone)} test(s) it ran"
                            f" before: {_ids(gone)}")
        worse = sorted(t for t in was.passed if after.outcomes.get(t) != "passed")
        if worse:
            return Decision(Status.ROLLED_BACK, f"check {r.name}: tests that passed before now "
                            f"{_outcomes(after, worse)}")
        other = sorted(t for t, ran in was.ran.items() if after.outcomes.get(t) == "passed"
                       and after.ran.get(t) != ran)
        if other:
            return Decision(Status.ROLLED_BACK, f"check {r.name}: tests ran other code than before (their"
                            f" function, or a name they read, is now bound to something else): {_ids(other)}")
    failing = _live(_failing_before(r.name, was, before), after, was)
    if was is None and prior is not None and prior.ok:
        failing = frozenset()  # it passed before: nothing of it was failing
    new = sorted(after.failing - failing)
    if new:
        return Decision(Status.ROLLED_BACK, f"check {r.name}: new failures: {_ids(new)}")
    hidden = sorted(t for t in failing if after.outcomes.get(t) not in ("passed", *FAILING))
    if hidden:
        now = _outcomes(after, hidden)
        why = f"check {r.name}: tests that failed before did not pass, they are now {now}"
        return Decision(Status.ROLLED_BACK, why)
    still = sorted(t for t in failing if after.outcomes.get(t) != "passed")
    if not still and r.ok and not after.collect_errors:
        if not after.passed and not failing:
            return Decision(Status.ROLLED_BACK, f"check {r.name} passed no test")
        return Decision(Status.FIXED)
    if still and len(still) < len(failing) and not after.collect_errors:
        return Decision(Status.IMPROVED, f"failures {len(failing)} -> {len(still)}")
    if not still:  # every test passes and the exit code still says no: a check that is not only tests
        return Decision(Status.ROLLED_BACK, f"check {r.name} still fails (exit {r.exit_code}) with its tests"
                        " passing")
    return Decision(Status.ROLLED_BACK, f"checks still fail ({len(still)} failures, before {len(failing)})")


def _failing_before(name: str, was: PerTestReport | None, before: Before) -> frozenset[str]:
    """The tests that failed before: the check's own report, else the ids the failure names."""
    if was is not None:
        return was.failing | frozenset(before.tests or ())
    return frozenset(before.tests or ())


def _live(ids: frozenset[str], *reports: PerTestReport | None) -> frozenset[str]:
    """The test ids as the runs name them: an id read from a failure event's stored output was redacted
    there (`test_parse[AKIA...]` became `test_parse[***]`, never run under that name, so a right fix
    was rolled back), so one no run names stands for each id of the runs that redacts to it; and one
    an earlier run numbered differently stands for the test the runs number otherwise
    (autod.checks.renumbered)."""
    known = {t for report in reports if report is not None for t in report.outcomes}
    strange = ids - known
    if not strange:
        return ids
    shown: dict[str, set[str]] = {}
    for t in known:
        said = redact_text(t)
        if said != t and said in strange:
            shown.setdefault(said, set()).add(t)
    live = frozenset(t for t in ids if t not in shown).union(*shown.values())
    return renumbered.known_as(live, known)  # an earlier run's numbering of the same tests


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    return shown + (f" (+{len(ids) - _SHOWN} more)" if len(ids) > _SHOWN else "")


def _outcomes(report: PerTestReport, ids: Sequence[str]) -> str:
    return _ids([f"{t} {report.outcomes.get(t, 'not run')}" for t in ids])


_SAID = {"fixed": "passed", "improved": "failed less", "no_change": "ran", "rolled_back": "still failed"}


def changed_sources(results: Sequence[CheckResult], verdict: str) -> Decision | None:
    """`rolled_back` when a check changed the workspace's sources, whatever it said (`verdict`)."""
    changed = [r for r in results if r.changed]
    if not changed:
        return None
    files = sorted({fsnames.shown(f) for r in changed for f in r.changed})  # a name may not be UTF-8
    shown = ", ".join(files[:10]) + (f" (+{len(files) - 10} more)" if len(files) > 10 else "")
    who = ", ".join(r.name for r in changed)
    return Decision(
        Status.ROLLED_BACK,
        f"the checks {_SAID.get(verdict, 'ran')} but check {who} changed source files during"
        f" verification ({shown}), so autod cannot tell its change from the fix: a check must not edit"
        " the source (run fixing commands as `fixer: true`; add build output to .gitignore)",
    )


def _by_failures(r: CheckResult, before: Before) -> Decision:
    """A failing check without per-test results: fewer failures by its own summary, or still failing."""
    why = broken(r)
    if why:
        return Decision(Status.ROLLED_BACK, f"check {r.name} {why}: that proves nothing, no improvement")
    named = failing_tests(r.output)
    if before.tests and named is not None:  # pytest's summary names them: strictly fewer, none new
        new = sorted(named - before.tests)
        if new:
            return Decision(Status.ROLLED_BACK, f"new failures: {_ids(new)}")
        if named < before.tests:
            return Decision(Status.IMPROVED, f"failures {len(before.tests)} -> {len(named)}")
        still = f"checks still fail ({len(named)} failures, before {len(before.tests)})"
        return Decision(Status.ROLLED_BACK, still)
    after = counted_failures(r)
    if after is not None and after < before.failures:
        return Decision(Status.IMPROVED, f"failures {before.failures} -> {after}")
    shown = after if after is not None else "uncounted"
    return Decision(Status.ROLLED_BACK, f"checks still fail ({shown} failures, before {before.failures})")


def broken(result: CheckResult) -> str | None:
    """Why a failing run says nothing about the tests (it ran none), or None."""
    tail = result.output[-_TAIL:]
    if _PYTEST_BROKEN.search(tail):
        return f"broke before its tests ran (exit {result.exit_code})"
    if result.exit_code in PYTEST_BROKEN_EXITS and _looks_like_pytest(tail):
        return f"ran no test (pytest exit {result.exit_code})"
    return None


def counted_failures(result: CheckResult) -> int | None:
    """Failures a run's own summary reports (pytest's, or parsed error lines); None when it has none."""
    if result.ok:
        return 0
    if result.tests is not None:
        return len(result.tests.failing) + len(result.tests.collect_errors) or None
    counts = [int(n) for n, _ in _PYTEST_COUNTS.findall(result.output[-_SUMMARY_TAIL:])]
    if counts:
        return sum(counts)
    from autod.sources.parsers import parse_failures

    found = len(parse_failures(result.output))
    return found or None


def count_failures(result: CheckResult) -> int:
    """How many failures a run reports, at least 1 when it failed (an event's count to compare with)."""
    counted = counted_failures(result)
    return counted if counted is not None else 1  # a run that passed is counted: 0


def failing_tests(text: str) -> frozenset[str] | None:
    """The pytest node ids a run's summary names as failed or in error, or None when it names none."""
    from autod.localize.frames import parse_test_ids

    ids = frozenset(t.nodeid for t in parse_test_ids(text, limit=_MAX_NAMED))
    return ids or None


def _looks_like_pytest(text: str) -> bool:
    return bool(_PYTEST_SUMMARY.search(text)) or "test session starts" in text or "pytest" in text
