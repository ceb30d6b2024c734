"""What a verification's check runs say about an edit: one pure function, `decide`, and its rules.

In order, the first that applies:
1. a focus command failed: `rolled_back` (the full check would only take longer to say so);
2. a check could not start: `rolled_back` (a check that cannot start proves nothing);
3. every check passed: `fixed`;
4. a check ran no test, or broke before its tests ran (pytest: interrupted, internal or usage error,
   nothing collected, errors during collection): `rolled_back` (an import the edit broke is not fewer
   failures);
5. fewer failures than before, and no new one: `improved`. With pytest's node ids on both sides the
   failing tests after must be a strict subset of those before; otherwise the counts must come from
   a summary the check printed, never from a guess;
6. otherwise `rolled_back` (still failing);
and whatever 3-6 said, a check that changed the workspace's sources makes it `rolled_back` (its change
is in no journal: autod can neither take it back nor tell it from the fix). Files a check merely
wrote (ignored by git, or untracked output: `CheckResult.outputs`) do not count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from autod.checks.run import CheckResult

_PYTEST_COUNTS = re.compile(r"(\d+) (failed|errors?)\b")
_PYTEST_SUMMARY = re.compile(r"=+ .*\b(passed|failed|errors?|skipped|no tests ran)\b.* in [\d.]+m?s", re.I)
_PYTEST_BROKEN = re.compile(
    r"errors? during collection|^ERROR collecting |ImportError while loading conftest"
    r"|^INTERNALERROR>|^(?:ERROR: )?usage: |no tests ran in ",
    re.M,
)
PYTEST_BROKEN_EXITS = frozenset({2, 3, 4, 5})  # interrupted, internal error, usage error, no tests


@dataclass(frozen=True)
class Before:
    """The failure the cycle works on: how many failed, and which tests (pytest node ids) if known."""

    failures: int
    tests: frozenset[str] | None = None


@dataclass(frozen=True)
class Decision:
    status: str  # fixed | improved | rolled_back
    reason: str = ""


def decide(results: Sequence[CheckResult], before: Before, *, focus: CheckResult | None = None) -> Decision:
    """The verification's status from its check runs (see the module's rules)."""
    if focus is not None and not focus.ok:
        check = focus.name.split(":")[0]
        return Decision("rolled_back", f"focus of check {check} failed; full check not run")
    if not results:
        return Decision("rolled_back", "no configured check to verify the edits with")
    for r in results:
        if r.error:
            return Decision("rolled_back", f"check {r.name} cannot start: {r.error}")
    verdict = _by_failures(results, before)
    return changed_sources(results, verdict.status) or verdict


_SAID = {"fixed": "passed", "improved": "failed less", "no_change": "ran", "rolled_back": "still failed"}


def changed_sources(results: Sequence[CheckResult], verdict: str) -> Decision | None:
    """`rolled_back` when a check changed the workspace's sources, whatever it said (`verdict`)."""
    changed = [r for r in results if r.changed]
    if not changed:
        return None
    files = sorted({f for r in changed for f in r.changed})
    shown = ", ".join(files[:10]) + (f" (+{len(files) - 10} more)" if len(files) > 10 else "")
    who = ", ".join(r.name for r in changed)
    return Decision(
        "rolled_back",
        f"the checks {_SAID.get(verdict, 'ran')} but check {who} changed source files during"
        f" verification ({shown}), so autod cannot tell its change from the fix: a check must not edit"
        " the source (run fixing commands as `fixer: true`; add build output to .gitignore)",
    )


def _by_failures(results: Sequence[CheckResult], before: Before) -> Decision:
    if all(r.ok for r in results):
        return Decision("fixed")
    for r in results:
        why = broken(r)
        if why:
            return Decision("rolled_back", f"check {r.name} {why}: that proves nothing, no improvement")
    after_tests = _failing_tests(results)
    if before.tests and after_tests is not None:
        new = sorted(after_tests - before.tests)
        if new:
            return Decision("rolled_back", f"new failures: {', '.join(new[:5])}")
        if after_tests < before.tests:
            return Decision("improved", f"failures {len(before.tests)} -> {len(after_tests)}")
        still = f"checks still fail ({len(after_tests)} failures, before {len(before.tests)})"
        return Decision("rolled_back", still)
    counts = [counted_failures(r) for r in results]
    after = sum(c for c in counts if c is not None)
    if None not in counts and after < before.failures:
        return Decision("improved", f"failures {before.failures} -> {after}")
    shown = after if None not in counts else "uncounted"
    return Decision("rolled_back", f"checks still fail ({shown} failures, before {before.failures})")


def broken(result: CheckResult) -> str | None:
    """Why a failing run says nothing about the tests (it ran none), or None."""
    tail = result.output[-8000:]
    if _PYTEST_BROKEN.search(tail):
        return f"broke before its tests ran (exit {result.exit_code})"
    if result.exit_code in PYTEST_BROKEN_EXITS and _looks_like_pytest(tail):
        return f"ran no test (pytest exit {result.exit_code})"
    return None


def counted_failures(result: CheckResult) -> int | None:
    """Failures a run's own summary reports (pytest's, or parsed error lines); None when it has none."""
    if result.ok:
        return 0
    counts = [int(n) for n, _ in _PYTEST_COUNTS.findall(result.output[-4000:])]
    if counts:
        return sum(counts)
    from autod.sources.parsers import parse_failures

    found = len(parse_failures(result.output))
    return found or None


def count_failures(result: CheckResult) -> int:
    """How many failures a run reports, at least 1 when it failed (an event's count to compare with)."""
    counted = counted_failures(result)
    return counted if counted is not None else (0 if result.ok else 1)


def failing_tests(text: str) -> frozenset[str] | None:
    """The pytest node ids a run's summary names as failed or in error, or None when it names none."""
    from autod.localize.frames import parse_test_ids

    ids = frozenset(t.nodeid for t in parse_test_ids(text, limit=500))
    return ids or None


def _failing_tests(results: Sequence[CheckResult]) -> frozenset[str] | None:
    out: set[str] = set()
    for r in results:
        if r.ok:
            continue
        ids = failing_tests(r.output)
        if ids is None:
            return None  # a failing run whose failures have no names: compare counts instead
        out |= ids
    return frozenset(out)


def _looks_like_pytest(text: str) -> bool:
    return bool(_PYTEST_SUMMARY.search(text)) or "test session starts" in text or "pytest" in text
