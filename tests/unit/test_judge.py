"""The judge decides by what each test did: generated before/after runs, and the invariant it keeps."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autod.checks.outcome import Before, decide
from autod.checks.pertest import PerTestReport
from autod.checks.run import CheckResult
from autod.config.models import CheckConfig
from autod.modes.verifying import checks_for
from autod.plan import Plan
from autod.verdict import Status

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def report(outcomes: dict[str, str], *, collected: set[str] | None = None,
           errors: tuple[str, ...] = ()) -> PerTestReport:
    return PerTestReport(outcomes, frozenset(collected if collected is not None else outcomes), errors)


def result(tests: PerTestReport | None, exit_code: int | None = None, name: str = "tests") -> CheckResult:
    if exit_code is None:
        exit_code = 0 if tests is not None and all(o in ("passed", "skipped", "xfailed", "xpassed")
                                                   for o in tests.outcomes.values()) else 1
    return CheckResult(name, exit_code, "", 10, tests=tests, expects_tests=True)


BEFORE_RUN = result(report({"t::a": "failed", "t::b": "passed", "t::c": "passed"}))
BEFORE = Before(1, frozenset({"t::a"}), {"tests": BEFORE_RUN})


def test_every_failing_test_now_passing_and_nothing_else_worse_is_fixed():
    d = decide([result(report({"t::a": "passed", "t::b": "passed", "t::c": "passed"}))], BEFORE)
    assert d.status is Status.FIXED


def test_a_failing_test_now_skipped_is_not_fixed_though_pytest_exits_0():
    # unittest.SkipTest or pytest.skip raised by the code under test: "1 skipped", exit 0
    after = result(report({"t::a": "skipped", "t::b": "passed", "t::c": "passed"}), exit_code=0)
    d = decide([after], BEFORE)
    assert d.status is Status.ROLLED_BACK and "t::a skipped" in d.reason


def test_a_failing_test_now_xfailed_or_deselected_is_not_fixed():
    for outcomes, collected in (({"t::a": "xfailed", "t::b": "passed", "t::c": "passed"}, None),
                                ({"t::b": "passed", "t::c": "passed"}, {"t::b", "t::c"})):
        d = decide([result(report(outcomes, collected=collected), exit_code=0)], BEFORE)
        assert d.status is Status.ROLLED_BACK, d


def test_a_pytest_run_that_reported_nothing_is_a_failed_run():
    # SystemExit(0) or os._exit(0) at import: exit 0, no result file
    d = decide([CheckResult("tests", 0, "", 10, tests=None, expects_tests=True)], BEFORE)
    assert d.status is Status.ROLLED_BACK and "reported no test results" in d.reason


def test_errors_during_collection_are_never_a_pass():
    outcomes = {"t::b": "passed", "t::c": "passed", "t::a": "passed"}
    after = result(report(outcomes, errors=("t.py",)), exit_code=0)
    assert decide([after], BEFORE).status is Status.ROLLED_BACK


def test_a_test_that_passed_before_and_now_fails_or_skips_is_a_regression():
    for now in ("failed", "skipped", "error", "xfailed"):
        d = decide([result(report({"t::a": "passed", "t::b": now, "t::c": "passed"}))], BEFORE)
        assert d.status is Status.ROLLED_BACK and "passed before" in d.reason, (now, d)


def test_fewer_failing_tests_and_nothing_worse_is_improved():
    before_run = result(report({"t::a": "failed", "t::b": "failed", "t::c": "passed"}))
    before = Before(2, None, {"tests": before_run})
    d = decide([result(report({"t::a": "passed", "t::b": "failed", "t::c": "passed"}))], before)
    assert d.status is Status.IMPROVED


def test_another_check_that_passed_before_must_still_pass():
    lint_before = CheckResult("lint", 0, "", 5)
    before = Before(1, frozenset({"t::a"}), {"tests": BEFORE_RUN, "lint": lint_before})
    fixed_tests = result(report({"t::a": "passed", "t::b": "passed", "t::c": "passed"}))
    d = decide([fixed_tests, CheckResult("lint", 1, "x.py:1:1: F401 unused", 5)], before)
    assert d.status is Status.ROLLED_BACK and "lint passed before" in d.reason


def test_a_passing_pytest_check_whose_tests_broke_is_rolled_back():
    other_before = result(report({"u::x": "passed"}), name="unit")
    before = Before(1, frozenset({"t::a"}), {"tests": BEFORE_RUN, "unit": other_before})
    fixed_tests = result(report({"t::a": "passed", "t::b": "passed", "t::c": "passed"}))
    broken = CheckResult("unit", 0, "", 5, tests=None, expects_tests=True)
    assert decide([fixed_tests, broken], before).status is Status.ROLLED_BACK


ids = st.sampled_from([f"t::{c}" for c in "abcdefgh"])


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    before=st.dictionaries(ids, st.sampled_from(("passed", "failed", "error")), min_size=1),
    after=st.dictionaries(ids, st.sampled_from(OUTCOMES)),
    exit_code=st.sampled_from((0, 1)),
    errors=st.sampled_from(((), ("t.py",))),
)
def test_fixed_only_when_every_failing_test_passes_and_nothing_got_worse(before, after, exit_code, errors):
    was = report(before)
    prior = CheckResult("tests", 0 if not was.failing else 1, "", 10, tests=was, expects_tests=True)
    run = CheckResult("tests", exit_code, "", 10, tests=report(after, errors=errors), expects_tests=True)
    d = decide([run], Before(max(1, len(was.failing)), None, {"tests": prior}))
    now = report(after)
    invariant = (
        exit_code == 0
        and not errors
        and all(now.outcomes.get(t) == "passed" for t in was.failing | was.passed)
        and was.seen <= now.seen
        and not now.failing
        and bool(now.passed)
    )
    assert (d.status is Status.FIXED) == invariant, (before, after, exit_code, errors, d)
    if d.status is Status.IMPROVED:  # never by hiding or breaking a test
        assert all(now.outcomes.get(t) == "passed" for t in was.passed)
        assert all(now.outcomes.get(t) in ("passed", "failed", "error") for t in was.failing)


def cfg(**kw: object) -> CheckConfig:
    return CheckConfig(run="python -m pytest", **kw)  # type: ignore[arg-type]


def test_the_failing_check_runs_first_then_every_check_that_passed_before():
    configured = {"lint": cfg(), "tests": cfg(), "docs": cfg(), "fix": cfg(fixer=True), "other": cfg()}
    runs = {"lint": CheckResult("lint", 0, "", 1), "tests": CheckResult("tests", 1, "", 1),
            "docs": CheckResult("docs", 0, "", 1), "other": CheckResult("other", 1, "", 1)}
    plan = Plan(summary="s", edits=[{"path": "src/a.py", "search": "x", "replace": "y"}])
    assert checks_for(configured, "tests", plan, runs) == ["tests", "lint", "docs"]


def test_a_check_whose_covers_miss_every_touched_file_is_skipped():
    configured = {"tests": cfg(), "docs": cfg(covers=["docs/**"])}
    runs = {"tests": CheckResult("tests", 1, "", 1), "docs": CheckResult("docs", 0, "", 1)}
    plan = Plan(summary="s", edits=[{"path": "src/a.py", "search": "x", "replace": "y"}])
    assert checks_for(configured, "tests", plan, runs) == ["tests"]
    plan = Plan(summary="s", edits=[{"path": "docs/a.md", "search": "x", "replace": "y"}])
    assert checks_for(configured, "tests", plan, runs) == ["tests", "docs"]


def test_a_check_that_reported_tests_before_must_report_them_after():
    # `make test` is not pytest itself, but the pytest it started reported each test before the candidate
    before_run = CheckResult("make", 1, "", 10, tests=report({"t::a": "failed", "t::b": "passed"}))
    after = CheckResult("make", 0, "", 10, tests=None, expects_tests=False)
    d = decide([after], Before(1, frozenset({"t::a"}), {"make": before_run}))
    assert d.status is Status.ROLLED_BACK and "reported no test results" in d.reason


def test_a_collection_error_there_before_is_not_new_but_still_fails_the_check():
    before_run = result(report({"t::a": "failed", "t::b": "passed"}, errors=("t2.py",)))
    before = Before(1, frozenset({"t::a"}), {"tests": before_run})
    after = result(report({"t::a": "passed", "t::b": "passed"}, errors=("t2.py",)), exit_code=1)
    d = decide([after], before)
    assert d.status is Status.ROLLED_BACK
    assert d.reason == "check tests still fails (exit 1) with its tests passing"


def test_a_check_that_passed_before_has_nothing_failing_even_a_test_the_failure_names():
    # `unit` passed before (no per-test report kept); it runs t::a too, which is now skipped there
    unit_before = CheckResult("unit", 0, "", 5)
    before = Before(1, frozenset({"t::a"}), {"tests": BEFORE_RUN, "unit": unit_before})
    fixed_tests = result(report({"t::a": "passed", "t::b": "passed", "t::c": "passed"}))
    unit_after = result(report({"t::a": "skipped", "u::b": "passed"}), exit_code=0, name="unit")
    assert decide([fixed_tests, unit_after], before).status is Status.FIXED


def test_a_failure_named_by_the_event_must_pass_where_no_per_test_report_was_kept_before():
    before = Before(1, frozenset({"t::a"}), {"tests": CheckResult("tests", 1, "1 failed", 5)})
    after = result(report({"t::a": "skipped", "t::b": "passed"}), exit_code=0)
    d = decide([after], before)
    assert d.status is Status.ROLLED_BACK and "t::a skipped" in d.reason


def test_a_pytest_check_that_passes_by_running_no_test_proves_nothing():
    d = decide([result(report({}), exit_code=0)], Before(1))
    assert d.status is Status.ROLLED_BACK and d.reason == "check tests passed no test"


def test_the_same_failing_tests_still_failing_is_no_improvement():
    before_run = result(report({"t::a": "failed", "t::b": "failed", "t::c": "passed"}))
    before = Before(2, None, {"tests": before_run})
    d = decide([result(report({"t::a": "failed", "t::b": "failed", "t::c": "passed"}))], before)
    assert d.status is Status.ROLLED_BACK and d.reason == "checks still fail (2 failures, before 2)"


def test_new_failures_are_listed_up_to_five_then_counted():
    five = {f"t::n{i}": "failed" for i in range(5)}
    d = decide([result(report({**BEFORE_RUN.tests.outcomes, **five}))], BEFORE)  # type: ignore[union-attr]
    assert d.reason == "check tests: new failures: t::n0, t::n1, t::n2, t::n3, t::n4"
    six = {**five, "t::n5": "failed"}
    d = decide([result(report({**BEFORE_RUN.tests.outcomes, **six}))], BEFORE)  # type: ignore[union-attr]
    assert d.reason.endswith("t::n4 (+1 more)")


def test_a_per_test_run_counts_its_failing_tests_and_collection_errors():
    from autod.checks.outcome import counted_failures

    assert counted_failures(result(report({"t::a": "failed", "t::b": "error"}, errors=("x.py",)))) == 3
    assert counted_failures(result(report({"t::a": "passed"}), exit_code=1)) is None  # failed, uncounted


PARTS = st.frozensets(st.sampled_from(["_pytest.reports.TestReport.__init__", "builtins.isinstance",
                                       "_pytest.python.Function.runtest", "_pytest.config.Config.rootdir"]),
                      max_size=4)


@given(before=PARTS, after=PARTS, foreign=PARTS)
@settings(max_examples=200, deadline=None)
def test_a_run_whose_runner_changed_beyond_the_run_before_is_never_kept(before, after, foreign):
    """Every test passes after the candidate; the runner's changes decide alone. With the run before to
    compare with: a change it did not show fails the candidate, one it showed (pytest configuring itself,
    a plugin's patch) does not. Without it: a change whose new value is foreign (the workspace's code)
    fails it."""
    foreign &= after
    was = result(PerTestReport({"t::a": "failed", "t::b": "passed"}, frozenset({"t::a", "t::b"}), (), before))
    now = result(PerTestReport({"t::a": "passed", "t::b": "passed"}, frozenset({"t::a", "t::b"}), (), after,
                               foreign))
    d = decide([now], Before(1, frozenset({"t::a"}), {"tests": was}))
    assert (d.status is Status.ROLLED_BACK) == bool(after - before), d
    if after - before:
        assert "test runner itself changed" in d.reason and sorted(after - before)[0] in d.reason
    alone = decide([now], Before(1, frozenset({"t::a"}), {}))
    assert (alone.status is Status.ROLLED_BACK) == bool(foreign), alone


def test_a_test_heard_passing_must_have_run_what_it_ran_before():
    """Generated: each test's digest (autod.checks.judge_path `ran`) kept, changed, or missing after,
    for a test that failed before and one that passed. Fixed only when every test that has a digest
    before passes with the same one after; a test with none before is not compared."""
    failing, passing = "t.py::a", "t.py::b"
    for a_after, b_after in itertools.product(("same", "other", "none"), repeat=2):
        was = dataclasses.replace(report({failing: "failed", passing: "passed"}),
                                  ran={failing: frozenset({"d1"}), passing: frozenset({"d2"})})
        digest = {"same": lambda d: {d}, "other": lambda d: {d, "x"}, "none": lambda d: None}
        ran = {t: frozenset(v) for t, d in ((failing, "d1"), (passing, "d2"))
               if (v := digest[a_after if t == failing else b_after](d)) is not None}
        now = dataclasses.replace(report({failing: "passed", passing: "passed"}), ran=ran)
        got = decide([result(now, 0)], Before(1, frozenset({failing}), {"tests": result(was, 1)}))
        if (a_after, b_after) == ("same", "same"):
            assert got.status is Status.FIXED, (a_after, b_after, got)
        else:
            assert got.status is Status.ROLLED_BACK and "ran other code" in got.reason, (a_after, b_after)
    unknown = report({failing: "failed", passing: "passed"})  # no digests before: nothing to compare
    now = dataclasses.replace(report({failing: "passed", passing: "passed"}), ran={failing: frozenset({"z"})})
    assert decide([result(now, 0)], Before(1, frozenset({failing}), {"tests": result(unknown, 1)})).status \
        is Status.FIXED


@pytest.mark.parametrize("secret", ["AKIAIOSFODNN7EXAMPLE", "sk-test-abcdefgh1234", "ghp_" + "a1B2" * 9,
                                    "password=hunter2secret"])
@pytest.mark.parametrize("kept", [True, False])
def test_a_failing_test_whose_id_reads_like_a_credential_is_fixed_when_it_passes(secret, kept):
    """The event stores its failing tests as the redacted output names them; the runs name them
    whole. A right fix was rolled back: `test_parse[***] not run`."""
    from autod.checks.outcome import failing_tests
    from autod.logs import redact_text

    tid = f"tests/test_p.py::test_parse[{secret}]"
    stored = failing_tests(redact_text(f"FAILED {tid} - assert 1 == 2\n1 failed in 0.1s"))
    assert (stored and tid not in stored) or secret.startswith("password")  # redacted where it is stored
    runs = {"tests": result(report({tid: "failed", "t::b": "passed"}))} if kept else {}
    d = decide([result(report({tid: "passed", "t::b": "passed"}))], Before(1, stored, runs))
    assert d.status is Status.FIXED, d.reason
    d = decide([result(report({tid: "failed", "t::b": "passed"}))], Before(1, stored, runs))
    assert d.status is Status.ROLLED_BACK  # and still failing is still failing
    other = "tests/test_p.py::test_parse[other]"
    d = decide([result(report({tid: "passed", other: "failed"}))], Before(1, stored, runs))
    assert d.status is not Status.FIXED


def test_a_stored_id_stands_for_the_run_ids_that_redact_to_it_and_no_others():
    from autod.checks.outcome import _live

    real, other = "t::p[AKIAIOSFODNN7EXAMPLE]", "t::q[sk-test-abcdefgh1234]"
    runs = report({real: "failed", other: "passed", "t::plain": "failed"})
    stored = frozenset({"t::p[***]", "t::plain"})
    assert _live(stored, runs) == {real, "t::plain"}
    assert _live(frozenset({"t::plain"}), runs) == {"t::plain"}
    assert _live(frozenset({"t::gone"}), runs, None) == {"t::gone"}  # named by no run: kept as it is
