"""Before planning, an event is checked against the present: the latest counted run of its check."""

from __future__ import annotations

from autod.checks.run import CheckResult
from autod.config.settings import CheckConfig
from autod.events import Event, EventKind
from autod.runtime.freshness import CheckLedger, Run, judge

CHECKS = {"tests": CheckConfig(run="pytest")}


def failure(fp: str = "A", at: float = 100.0) -> Event:
    return Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint=fp,
                 payload={"check": "tests", "checked_at": at})


def ledger_with(*runs: Run) -> CheckLedger:
    ledger = CheckLedger()
    for run in runs:
        ledger.record(run, CheckResult(run.check, 0 if run.ok else 1, "", 1, error=run.error))
    return ledger


def test_the_event_of_the_latest_run_is_planned():
    assert judge(failure(at=100), ledger_with(Run("tests", 100, False, "A")), CHECKS).plan


def test_a_failure_whose_check_passed_since_is_resolved_without_a_cycle():
    v = judge(failure(at=100), ledger_with(Run("tests", 150, True)), CHECKS)
    assert not v.plan and "passed" in v.reason


def test_a_failure_superseded_by_a_fresher_different_failure_is_resolved():
    v = judge(failure("A", at=100), ledger_with(Run("tests", 150, False, "B")), CHECKS)
    assert not v.plan and "superseded" in v.reason and "B" in v.reason


def test_a_fresher_run_failing_the_same_way_agrees_with_the_news():
    assert judge(failure("A", at=100), ledger_with(Run("tests", 150, False, "A")), CHECKS).plan


def test_no_run_yet_asks_for_the_check_to_run_first_and_a_dropped_check_resolves():
    v = judge(failure(), CheckLedger(), CHECKS)
    assert not v.plan and v.probe == "tests"
    gone = judge(failure(), CheckLedger(), {})
    assert not gone.plan and "no longer configured" in gone.reason


def test_other_events_are_always_news():
    build = Event(source="logtail:b", kind=EventKind.BUILD_FAILED, summary="x", fingerprint="A")
    assert judge(build, CheckLedger(), CHECKS).plan


def test_a_cycles_runs_count_only_if_it_keeps_its_edits():
    ledger = ledger_with(Run("tests", 100, False, "A"))
    ledger.hold()
    assert ledger.record(Run("tests", 120, True), CheckResult("tests", 0, "", 1)) == []
    assert ledger.latest("tests").at == 100  # a rolled-back cycle's runs describe files that are gone
    assert ledger.release(keep=False) == []
    assert ledger.latest("tests").at == 100 and not ledger.results["tests"].ok
    ledger.hold()
    ledger.record(Run("tests", 130, True), CheckResult("tests", 0, "", 1))
    assert [r.at for r in ledger.release(keep=True)] == [130]
    assert ledger.latest("tests").ok and ledger.results["tests"].ok
