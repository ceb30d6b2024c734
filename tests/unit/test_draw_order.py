"""Suspects are asked the likeliest fix per second first (autod.candidates.order)."""

from __future__ import annotations

import asyncio
import itertools
import random

from test_candidates import Judge, ViewDrawer, search, whole

from autod.candidates.order import RANK_PRIOR, cost, draw_order, prior


def expected_seconds(order: list[int], sizes: list[tuple[int, int]]) -> float:
    """What reaching the buggy suspect costs on average, asking in `order` (the bug is at rank k with
    the rank's prior; past all of them, every draw is paid)."""
    paid, total = 0.0, 0.0
    for k in order:
        paid += cost(*sizes[k - 1])
        total += prior(k) * paid
    return total + (1 - sum(prior(k) for k in order)) * paid


def test_the_order_is_the_one_with_the_least_expected_time_to_the_bug_for_any_sizes():
    rng = random.Random(7)
    for _ in range(500):
        count = rng.randint(1, 5)
        sizes = []
        for _ in range(count):
            code = rng.choice([rng.randint(5, 40), rng.randint(40, 400), rng.randint(400, 2000)])
            sizes.append((code, code + rng.randint(0, 300)))
        got = draw_order(sizes, count)
        best = min(expected_seconds(list(p), sizes) for p in itertools.permutations(range(1, count + 1)))
        assert sorted(got) == list(range(1, count + 1))
        assert abs(expected_seconds(got, sizes) - best) <= 1e-9 * max(1.0, best), (sizes, got)


def test_same_sized_suspects_keep_rank_order_and_a_long_first_one_waits_for_a_much_shorter_second():
    assert draw_order([(100, 120)] * 3, 3) == [1, 2, 3]
    assert draw_order([], 3) == [1, 2, 3] and draw_order([(10, 10)], 3) == [1, 2, 3]  # sizes not known
    # a 29-line first suspect beside a 3-line second: the short one first, the long one right after
    assert draw_order([(260, 300), (25, 40)], 2) == [2, 1]
    # twice as long is not enough to pass a rank whose odds are three times as high
    assert RANK_PRIOR[0] / RANK_PRIOR[1] > 2
    assert draw_order([(120, 140), (60, 70)], 2) == [1, 2]


def test_the_search_asks_its_suspects_in_that_order_greedy_and_sampled(tmp_path):
    plans = [whole(f"return a * {k}") for k in range(12)]
    drawer = ViewDrawer(*plans, suspects=3, sizes=((400, 450), (20, 30), (100, 120)))
    asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=2).attempt(1))
    asked = [(a.get("view", "wide"), a["temperature"] == 0.0) for a in drawer.asked]
    # the short second suspect first; the long first one still before the third, whose odds are lower
    assert asked == [("focused:2", True), ("focused:1", True), ("focused:3", True),
                     ("focused:2", False), ("focused:1", False), ("focused:3", False), ("wide", True)]
