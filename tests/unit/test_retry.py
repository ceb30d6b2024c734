"""The retry policy: what happens to an event after its cycle (done, tried again later, or given up)."""

from __future__ import annotations

import pytest

from autod.config.settings import Limits
from autod.errors import BudgetExhausted, LLMUnavailable, PlanInvalid, PlanRejected
from autod.events import Event, EventKind
from autod.reflection import Reflection
from autod.runtime.retry import JITTER, RetryPolicy


def event(kind: EventKind = EventKind.CHECK_FAILED) -> Event:
    return Event(source="check:t", kind=kind, summary="t failed", fingerprint="fp", payload={"check": "t"})


def ended(status: str, reason: str | None = None, *, quarantined: bool = False) -> Reflection:
    r = Reflection("c1", "e1", "auto-debug", "fp", "check_failed", "s", status=status, reason=reason)
    r.quarantined = quarantined
    return r


def policy(rand: float = 0.5, **limits: object) -> RetryPolicy:
    return RetryPolicy(Limits(**{"retry_base_s": 10, "retry_max_s": 100, "max_retries": 3, **limits}),
                       rand=lambda: rand)


@pytest.mark.parametrize("error", [LLMUnavailable("HTTP 500 from the LLM"), BudgetExhausted("tokens")])
def test_a_cycle_that_failed_on_the_llm_is_retried_with_the_reason(error):
    d = policy().decide(event(), ended("failed", error.reason), error, retries=0)
    assert d.retry and d.delay_s == 10 and error.reason in d.reason


def test_a_reply_the_model_got_wrong_is_an_attempt_not_an_outage():
    """The server answered: the failure is tried again like any unfixed one, bounded by the
    fingerprint's attempts, never retried as if the server were down (max_retries)."""
    error = PlanInvalid("invalid JSON: Invalid control character")
    assert not error.external
    d = policy(max_retries=0).decide(event(), ended(error.status, error.reason), error, retries=5)
    assert d.retry and "still failing after a cycle that rejected" in d.reason


def test_the_delay_doubles_is_capped_and_jittered_around_its_value():
    assert [policy().delay(n) for n in range(5)] == [10, 20, 40, 80, 100]
    assert policy(rand=0.0).delay(0) == pytest.approx(10 * (1 - JITTER))
    assert policy(rand=1.0).delay(9) == pytest.approx(100 * (1 + JITTER))


def test_after_max_retries_an_outage_gives_up_loudly_instead_of_forever():
    d = policy().decide(event(), ended("failed", "down"), LLMUnavailable("down"), retries=3)
    assert d.action == "give_up" and "max_retries" in d.reason


@pytest.mark.parametrize("status", ["rolled_back", "rejected", "no_change"])
def test_a_check_failure_still_failing_after_a_cycle_is_attempted_again_later(status):
    err = PlanRejected("search text not found") if status == "rejected" else None
    assert policy().decide(event(), ended(status), err, retries=0).retry


def test_a_quarantined_failure_a_fix_or_a_bug_in_autod_is_not_retried():
    p = policy()
    assert p.decide(event(), ended("rolled_back", quarantined=True), None, 0).action == "done"
    assert p.decide(event(), ended("fixed"), None, 0).action == "done"
    assert p.decide(event(), ended("failed", "internal error: KeyError"), None, 0).action == "done"


def test_a_manual_event_is_retried_on_an_outage_but_not_when_its_plan_fails():
    p = policy()
    assert p.decide(event(EventKind.MANUAL), ended("failed"), LLMUnavailable("x"), 0).retry
    assert p.decide(event(EventKind.MANUAL), ended("rolled_back"), None, 0).action == "done"


def test_run_once_does_not_wait_to_attempt_a_still_failing_failure_again_but_waits_out_an_outage():
    p = RetryPolicy(Limits(retry_base_s=10), once=True, rand=lambda: 0.5)
    assert p.decide(event(), ended("rolled_back"), None, 0).action == "done"
    assert p.decide(event(), ended("failed"), LLMUnavailable("down"), 0).retry
