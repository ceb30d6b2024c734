"""The first attempt's draws in Blackwell's order: odds x detection / cost, odds lowered after each miss
(autod.candidates.order), checked over generated suspects, values and wide prompts."""

from __future__ import annotations

import asyncio
import itertools
import random

from test_candidates import Judge, ViewDrawer, search, whole

from autod.candidates.order import GREEDY, RANK_PRIOR, Sizes, cost, fixed_order, plan, prior
from autod.plan import Plan


def expected_cost(order: list[int], sizes: list[tuple[int, int]]) -> float:
    """What reaching the buggy suspect costs on average with one look each, asking in `order`."""
    paid, total = 0.0, 0.0
    for k in order:
        paid += cost(*sizes[k - 1])
        total += prior(k) * paid
    return total + (1 - sum(prior(k) for k in order)) * paid


def generated(rng: random.Random) -> Sizes:
    """Suspects of every length (a 2-line helper to a 300-line method), value groups, a wide prompt."""
    suspects = []
    for _ in range(rng.randint(1, 10)):
        code = rng.choice([rng.randint(5, 40), rng.randint(40, 400), rng.randint(400, 2000)])
        suspects.append((code, code + rng.choice([0, rng.randint(1, 300)])))
    values = [rng.randint(5, 200) for _ in range(rng.randint(0, 3))]
    return Sizes(suspects, values, rng.randint(500, 12_000))


def test_one_look_each_is_smiths_order_the_least_expected_cost_to_the_bug():
    rng = random.Random(7)
    for _ in range(300):
        count = rng.randint(1, 5)
        sizes = generated(rng).suspects[:count]
        count = len(sizes)
        # one look each, and a wide prompt too long to ever be worth a look before them
        looks = plan(Sizes(sizes, [], 10**9), 1, 1)
        got = [int(v.partition(":")[2]) for v, _ in looks if v != "wide"]
        best = min(expected_cost(list(p), list(sizes)) for p in itertools.permutations(range(1, count + 1)))
        assert sorted(got) == list(range(1, count + 1))
        assert abs(expected_cost(got, list(sizes)) - best) <= 1e-9 * max(1.0, best), (sizes, got)


def test_every_plan_keeps_the_search_s_bounds_for_any_sizes():
    """At most `per` draws a suspect, the first greedy and the rest sampled; a value group once,
    greedy; the wide prompt's n draws all there, the first greedy, the plan ending with its last."""
    rng = random.Random(11)
    for _ in range(2000):
        sizes, per, n = generated(rng), rng.randint(1, 6), rng.randint(1, 6)
        looks = plan(sizes, per, n)
        assert looks[-1][0] == "wide" and [g for v, g in looks if v == "wide"] == [True] + [False] * (n - 1)
        for k in range(1, len(sizes.suspects) + 1):
            mine = [g for v, g in looks if v == f"focused:{k}"]
            assert len(mine) <= per and all(g == (i == 0) for i, g in enumerate(mine))
        for j in range(1, len(sizes.values) + 1):
            assert [g for v, g in looks if v == f"value:{j}"] in ([], [True])
        assert {v for v, _ in looks} <= {"wide", *(f"focused:{k}" for k in range(1, len(sizes.suspects) + 1)),
                                         *(f"value:{j}" for j in range(1, len(sizes.values) + 1))}
        assert plan(sizes, 0, n) == [("wide", i == 0) for i in range(n)]  # no focused draws: the wide alone


def test_a_longer_suspect_is_never_asked_sooner_nor_more_often():
    """Lengthening one suspect (all else the same) never moves its first draw earlier among the others'
    draws, nor gives it more draws: its odds are the same and each of its draws costs more."""
    rng = random.Random(5)
    for _ in range(1000):
        sizes = generated(rng)
        k = rng.randint(1, len(sizes.suspects))
        code, read = sizes.suspects[k - 1]
        grow = rng.randint(1, 1500)
        longer = Sizes([*sizes.suspects[: k - 1], (code + grow, read + grow), *sizes.suspects[k:]],
                       sizes.values, sizes.wide)
        view = f"focused:{k}"

        def first_and_count(s: Sizes, view: str = view) -> tuple[int, int]:
            looks = [v for v, _ in plan(s, 4, 4)]
            return (looks.index(view) if view in looks else len(looks)), looks.count(view)

        (at, count), (at2, count2) = first_and_count(sizes), first_and_count(longer)
        assert count2 <= count
        assert at2 >= at  # the draws before its first: the same ones, and maybe more


def test_a_short_low_ranked_helper_comes_before_a_long_first_suspect_s_samples_and_the_wide_prompt():
    # the first suspect a 500-token method; the seventh a 2-line helper
    sizes = Sizes([(500, 520), (300, 300), (300, 300), (300, 300), (300, 300), (300, 300), (25, 25)], [],
                  7000)
    looks = plan(sizes, 4, 4)
    helper, wide = looks.index(("focused:7", True)), looks.index(("wide", True))
    assert helper < wide
    assert helper < looks.index(("focused:1", False)) if ("focused:1", False) in looks else True
    assert looks[0] == ("focused:1", True)  # the likeliest still first: its odds are 19x the helper's


def test_a_long_low_ranked_suspect_waits_for_the_wide_prompt_and_a_short_one_does_not():
    long_third = plan(Sizes([(100, 100), (100, 100), (1500, 1500)], [], 6000), 4, 4)
    short_third = plan(Sizes([(100, 100), (100, 100), (60, 60)], [], 6000), 4, 4)
    assert "focused:3" not in {v for v, _ in long_third}  # cheaper to find it through the wide prompt
    assert short_third.count(("focused:3", False)) == 3
    assert short_third.index(("focused:3", True)) < short_third.index(("wide", True))


def test_the_odds_are_the_measured_ones_and_the_greedy_draw_is_worth_most():
    assert RANK_PRIOR[0] / RANK_PRIOR[1] > 2 and prior(4) < prior(3) and prior(11) == 0.0
    assert 0 < GREEDY < 1
    same = plan(Sizes([(100, 120)] * 3, [], 10**9), 1, 1)
    assert [v for v, _ in same] == ["focused:1", "focused:2", "focused:3", "wide"]  # same sizes: rank order


def test_the_search_asks_in_the_planned_order_and_in_the_fixed_one_without_sizes(tmp_path):
    sizes = ((400, 450), (20, 30), (100, 120))
    want = plan(Sizes(sizes, [15], 3000), 2, 2)
    plans = [whole(f"return a * {k}") for k in range(20)]
    drawer = ViewDrawer(*plans, suspects=3, values=1, sizes=sizes, value_sizes=(15,), wide=3000)
    asyncio.run(search(tmp_path, drawer, Judge({}), n=2, focused=2).attempt(1))
    asked = [(a.get("view", "wide"), a["temperature"] == 0.0) for a in drawer.asked]
    assert asked == want and asked[0] == ("focused:2", True)  # the short second suspect first

    plans = [whole(f"return a * {k}") for k in range(20)]
    drawer = ViewDrawer(*plans, suspects=2, values=1)  # sizes not known
    asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=2).attempt(1))
    asked = [(a.get("view", "wide"), a["temperature"] == 0.0) for a in drawer.asked]
    assert asked == fixed_order(2, 1, 2, 1) == [
        ("focused:1", True), ("focused:2", True), ("value:1", True), ("focused:1", False),
        ("focused:2", False), ("wide", True)]


def test_a_planned_sampled_draw_that_gives_the_code_back_is_drawn_again_the_plan_unchanged(tmp_path):
    """A sampled echo looked at nothing: the odds are as they were, so the same draw comes again (as
    many such as its prompt has draws, at most), and the plan's other draws follow in their order."""
    sizes = ((40, 40), (60, 60))
    want = plan(Sizes(sizes, [], 2000), 3, 1)
    echo = Plan(summary="Here it is.").with_quotes(1)  # the prompt's block given back
    drawer = ViewDrawer(*[echo] * 60, suspects=2, sizes=sizes, wide=2000)
    asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=3).attempt(1))
    asked = [a.get("view", "wide") for a in drawer.asked]
    # each suspect: its greedy draw, its pointed question in place of its first sample, its other
    # sample, and that sample's echo drawn again twice (as many as the prompt's two draws left)
    for k in (1, 2):
        assert asked.count(f"focused:{k}") == 1 + 1 + 2 and asked.count(f"pointed:{k}") == 1
    named = [v.replace("pointed", "focused") for v in asked]  # a pointed question is its suspect's draw
    compact = [v for i, v in enumerate(named) if i == 0 or v != named[i - 1]]
    assert compact == [v for i, (v, _) in enumerate(want) if i == 0 or v != want[i - 1][0]]
