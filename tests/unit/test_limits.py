"""Limits in one place: rate, budgets, caps, quarantine and the circuit breaker."""

from __future__ import annotations

import time

import pytest

from autod.config.settings import Limits
from autod.cycle.limits import CircuitBreaker, Gate
from autod.events import Event, EventKind
from autod.stores.state import State, day_key


@pytest.fixture
def state(tmp_path):
    s = State(tmp_path / "state.db")
    yield s
    s.close()


def failure(fp: str = "fp1") -> Event:
    return Event(source="check:t", kind=EventKind.CHECK_FAILED, summary="t failed", fingerprint=fp)


def start_cycles(state: State, n: int, at: float) -> None:
    for i in range(n):
        state.cycle_started(f"c{at}{i}", "e", "auto-debug", "fp", "check_failed", "s")
        state._tx("UPDATE cycles SET started_at=? WHERE id=?", (at, f"c{at}{i}"))


def test_min_interval_makes_the_next_cycle_wait(state):
    gate = Gate(Limits(min_interval_s=30), state, None)
    now = time.time()
    assert gate.admit(failure(), uses_llm=False, now=now).ok
    start_cycles(state, 1, now)
    v = gate.admit(failure(), uses_llm=False, now=now + 10)
    assert not v.ok and v.reason == "min_interval_s" and 19 <= v.wait_s <= 20
    assert gate.admit(failure(), uses_llm=False, now=now + 31).ok


def test_cycles_per_hour_cap(state):
    gate = Gate(Limits(min_interval_s=0, max_cycles_per_hour=3), state, None)
    now = time.time()
    start_cycles(state, 3, now - 100)
    v = gate.admit(failure(), uses_llm=False, now=now)
    assert not v.ok and "max_cycles_per_hour (3/3)" in v.reason
    assert gate.admit(failure(), uses_llm=False, now=now + 3600).ok


def test_token_budget_spent_waits_for_the_next_utc_day_only_for_llm_cycles(state):
    gate = Gate(Limits(min_interval_s=0, max_tokens_per_day=1000), state, None)
    now = time.time()
    gate.book(edits=0, tokens=1200, now=now)
    v = gate.admit(failure(), uses_llm=True, now=now)
    assert not v.ok and "max_tokens_per_day" in v.reason and 0 < v.wait_s <= 86400
    assert gate.admit(failure(), uses_llm=False, now=now).ok
    assert state.get(f"tokens:{day_key(now)}") == 1200


def test_caps_shrink_to_what_is_left_of_the_day(state):
    gate = Gate(Limits(max_edits_per_cycle=10, max_edits_per_day=12), state, None)
    gate.book(edits=9, tokens=0)
    assert gate.caps().max_edits == 3
    gate.book(edits=3, tokens=0)
    assert gate.caps().max_edits == 0
    assert not gate.admit(failure(), uses_llm=False).ok


def test_fingerprint_is_quarantined_after_max_attempts_and_a_fix_resets_it(state):
    gate = Gate(Limits(max_attempts_per_fingerprint=2, min_interval_s=0), state, None)
    assert (
        gate.record_attempt(failure(), "rolled_back", {"summary": "a", "diff": "d", "output": "o"}) is False
    )
    assert state.fingerprint("fp1")["last_attempt"]["diff"] == "d"
    assert gate.record_attempt(failure(), "rolled_back", None) is True
    v = gate.admit(failure(), uses_llm=False)
    assert not v.ok and v.drop and "quarantined" in v.reason
    assert [q["fingerprint"] for q in state.quarantined()] == ["fp1"]
    gate.record_attempt(failure("fp2"), "rolled_back", None)
    gate.record_attempt(failure("fp2"), "fixed", None)
    assert state.fingerprint("fp2")["attempts"] == 0


def test_non_failure_events_are_never_quarantined(state):
    gate = Gate(Limits(max_attempts_per_fingerprint=1), state, None)
    ev = Event(source="watch", kind=EventKind.FILES_CHANGED, summary="x", fingerprint="fc")
    assert gate.record_attempt(ev, "rolled_back", None) is False


class Clock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_circuit_breaker_opens_half_opens_and_closes():
    clock = Clock()
    b = CircuitBreaker(threshold=2, cooldown_s=30, clock=clock)
    b.failure()
    assert b.state == "closed" and b.allow()[0]
    b.failure()
    assert b.state == "open" and b.allow() == (False, 30)
    clock.now += 29.5
    assert b.state == "open" and b.allow() == (False, 0.5)
    clock.now += 0.5
    assert b.state == "half-open" and b.allow()[0]
    b.failure()  # a failure while half-open opens it again at once
    assert b.state == "open"
    clock.now += 30
    b.success()
    assert b.state == "closed" and b.snapshot()["consecutive_failures"] == 0


def test_the_breaker_keeps_its_own_time_and_shows_wall_time():
    clock = Clock()
    b = CircuitBreaker(threshold=1, cooldown_s=60, clock=clock)
    b.failure()
    clock.now += 10
    # status shows when it opened on the wall clock, whatever clock the breaker counts on
    assert b.snapshot()["opened_at"] == pytest.approx(time.time() - 10, abs=1)
    b.half_open()  # the LLM answers again: one cycle may try now
    assert b.state == "half-open" and b.allow() == (True, 0.0)


def test_open_breaker_blocks_llm_cycles_in_the_gate(state):
    b = CircuitBreaker(threshold=1, cooldown_s=60)
    gate = Gate(Limits(min_interval_s=0), state, b)
    b.failure()
    v = gate.admit(failure(), uses_llm=True)
    assert not v.ok and v.reason == "LLM circuit breaker open" and v.wait_s > 50


def test_the_hourly_cap_says_exactly_when_a_slot_frees(state):
    # --once decides at once from this wait whether it may wait (it used to hear "60 s" every minute)
    now = time.time()
    start_cycles(state, 1, now - 3000)
    start_cycles(state, 1, now - 100)
    gate = Gate(Limits(max_cycles_per_hour=2, min_interval_s=0), state, None)
    v = gate.admit(failure(), uses_llm=False, now=now)
    assert not v.ok and v.wait_s == pytest.approx(600, abs=1) and "max_cycles_per_hour (2/2)" in v.reason


def test_limits_hold_at_their_exact_edges(state):
    now = time.time()
    gate = Gate(Limits(min_interval_s=30, max_tokens_per_day=1000), state, None)
    start_cycles(state, 1, now - 30)
    assert gate.admit(failure(), uses_llm=False, now=now).ok  # exactly the interval: may start
    v = gate.admit(failure(), uses_llm=False, now=now - 1)
    assert v.ok is False and v.reason == "min_interval_s"
    gate.book(edits=0, tokens=1000, now=now)  # exactly the budget: spent
    v = gate.admit(failure(), uses_llm=True, now=now)
    assert v.ok is False and v.reason.startswith("max_tokens_per_day spent (1000/1000)")


def test_a_refusal_is_false_not_merely_falsy_and_names_its_limit(state):
    now = time.time()
    gate = Gate(Limits(min_interval_s=0, max_edits_per_day=2), state, None)
    gate.book(edits=2, tokens=0, now=now)
    v = gate.admit(failure(), uses_llm=False, now=now)
    assert v.ok is False and v.reason == "max_edits_per_day reached" and 0 < v.wait_s <= 86400
    gate.record_attempt(failure(), "rolled_back", None)
    b = CircuitBreaker(threshold=1, cooldown_s=60)
    b.failure()
    assert Gate(Limits(min_interval_s=0), state, b).admit(failure(), uses_llm=True, now=now).ok is False


def test_caps_carry_the_line_and_file_size_limits(state):
    caps = Gate(Limits(max_lines_per_cycle=77, max_file_bytes=4096), state, None).caps()
    assert (caps.max_lines, caps.max_file_bytes) == (77, 4096)


def test_an_attempt_records_its_status_and_the_check_that_found_it(state):
    gate = Gate(Limits(max_attempts_per_fingerprint=5), state, None)
    ev = Event(
        source="check:tests", kind=EventKind.CHECK_FAILED, summary="t failed", fingerprint="fp9",
        payload={"check": "tests"},
    )
    assert gate.record_attempt(ev, "rolled_back", None) is False
    fp = state.fingerprint("fp9")
    assert (fp["last_status"], fp["check_name"]) == ("rolled_back", "tests")


def test_an_open_breaker_says_how_long_is_left_and_half_open_lets_one_cycle_try():
    b = CircuitBreaker(threshold=1, cooldown_s=60)
    assert b.allow() == (True, 0.0)
    b.failure()
    ok, wait = b.allow()
    assert not ok and 59 <= wait <= 60
    b.half_open()
    assert b.state == "half-open" and b.allow()[0]
    b.failure()
    assert b.state == "open"


def test_a_spent_budget_waits_exactly_until_the_next_utc_midnight(state):
    from datetime import UTC, datetime

    now = datetime(2026, 3, 4, 22, 59, 30, tzinfo=UTC).timestamp()
    gate = Gate(Limits(min_interval_s=0, max_tokens_per_day=1000), state, None)
    gate.book(edits=0, tokens=1000, now=now)
    assert gate.admit(failure(), uses_llm=True, now=now).wait_s == 3630


def test_a_fixed_attempt_is_never_reported_as_a_quarantine(state):
    gate = Gate(Limits(max_attempts_per_fingerprint=1), state, None)
    assert gate.record_attempt(failure(), "fixed", None) is False


def test_the_hour_is_an_hour_and_the_wait_ends_when_a_slot_frees(state):
    now = time.time()
    gate = Gate(Limits(min_interval_s=0, max_cycles_per_hour=1), state, None)
    start_cycles(state, 1, now - 3600.5)  # just out of the hour
    assert gate.admit(failure(), uses_llm=False, now=now).ok
    start_cycles(state, 1, now - 1800)
    v = gate.admit(failure(), uses_llm=False, now=now)
    assert v.ok is False and v.wait_s == pytest.approx(1800)


def test_a_wait_shorter_than_a_second_is_a_second(state):
    from datetime import UTC, datetime

    now = time.time()
    hourly = Gate(Limits(min_interval_s=0, max_cycles_per_hour=1), state, None)
    start_cycles(state, 1, now - 3599.5)  # its slot frees in half a second
    assert hourly.admit(failure(), uses_llm=False, now=now).wait_s == 1.0
    clock = [100.0]
    breaker = CircuitBreaker(threshold=1, cooldown_s=10, clock=lambda: clock[0])
    breaker.failure()
    clock[0] = 109.5
    gate = Gate(Limits(min_interval_s=0, max_cycles_per_hour=100), state, breaker)
    assert gate.admit(failure(), uses_llm=True, now=now).wait_s == 1.0
    tomorrow = datetime.fromtimestamp(now + 86400, UTC)
    midnight = tomorrow.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()  # after every cycle
    budget = Gate(Limits(min_interval_s=0, max_cycles_per_hour=100, max_tokens_per_day=1000), state, None)
    budget.book(edits=0, tokens=1000, now=midnight - 0.5)
    assert budget.admit(failure(), uses_llm=True, now=midnight - 0.5).wait_s == 1.0


def test_counters_show_the_last_hour_the_day_and_their_caps(state):
    now = time.time() - 7 * 86400  # a moment of the caller's choosing, not the clock's
    gate = Gate(Limits(max_cycles_per_hour=5, max_edits_per_day=7, max_tokens_per_day=9000), state, None)
    start_cycles(state, 1, now - 3599)
    start_cycles(state, 1, now - 3601)
    gate.book(edits=2, tokens=300, now=now)
    assert gate.counters(now) == {
        "cycles_last_hour": {"used": 1, "cap": 5},
        "edits_today": {"used": 2, "cap": 7},
        "tokens_today": {"used": 300, "cap": 9000},
    }
