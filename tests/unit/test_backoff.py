"""The one backoff rule (autod.backoff): doubled per attempt, capped, spread by its jitter."""

from __future__ import annotations

import pytest

from autod.backoff import Backoff


def test_the_delay_doubles_from_the_first_and_stops_at_the_cap():
    rule = Backoff(5, 60)
    assert [rule.delay(n) for n in range(6)] == [5, 10, 20, 40, 60, 60]
    assert rule.delay(-3) == 5  # no attempt shortens the first wait


def test_an_attempt_count_of_years_stays_at_the_cap():
    assert Backoff(0.05, 3600).delay(10**9) == 3600


def test_jitter_draws_between_the_spreads_fractions_of_the_nominal_delay():
    rule = Backoff(10, 100, (0.8, 1.2))
    assert rule.delay(0, lambda: 0.0) == pytest.approx(8)
    assert rule.delay(0, lambda: 0.5) == pytest.approx(10)
    assert rule.delay(9, lambda: 0.999) == pytest.approx(100 * (0.8 + 0.4 * 0.999))
    upper_half = Backoff(1, 30, (0.5, 1.0))
    assert [upper_half.delay(n, lambda: 0.0) for n in range(3)] == [0.5, 1, 2]


def test_no_jitter_draws_no_random_number():
    def never() -> float:
        raise AssertionError("drew a random number")

    assert Backoff(1, 60).delay(2, never) == 4
