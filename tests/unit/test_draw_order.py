"""The first attempt's draws in Blackwell's order: odds x detection / cost, odds lowered after each miss
(autod.candidates.order), checked over generated suspects, values and wide prompts."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from test_candidates import Judge, ViewDrawer, search, whole

from autod.candidates.order import (
    GREEDY,
    RANK_PRIOR,
    READ_PER_GENERATED,
    Sizes,
    cost,
    fixed_order,
    plan,
    prior,
    replan,
)
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


def replanned(sizes: Sizes, per: int, n: int, echoes: dict[str, bool]) -> list[tuple[str, bool]]:
    """The draws a search makes when every draw misses: the plan, made again after each suspect's
    greedy draw with whether it gave the code back (`echoes`, by view, else it changed something; no
    pointed questions)."""
    views, done = plan(sizes, per, n), []
    for i in range(len(plan(sizes, per, n)) * 2):
        if i >= len(views):
            break
        view, greedy = views[i]
        done.append((view, echoes.get(view, False) if greedy else None))
        if greedy and view.startswith("focused:"):
            views[i + 1:] = replan(sizes, per, n, done)
    return views


def a_greedy_draw(rng: random.Random, least_per: int) -> tuple[Sizes, int, int, str, list] | None:
    """A generated plan and one of its suspects' greedy draws: (sizes, draws a suspect, wide draws, the
    suspect's view, the plan's draws before it, each missed); None when the plan has no suspect."""
    sizes, per, n = generated(rng), rng.randint(least_per, 5), rng.randint(1, 4)
    whole_plan = plan(sizes, per, n)
    firsts = [i for i, (v, g) in enumerate(whole_plan) if g and v.startswith("focused:")]
    if not firsts:
        return None
    at = rng.choice(firsts)
    return sizes, per, n, whole_plan[at][0], [(v, None) for v, _ in whole_plan[:at]]


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
    want = replanned(Sizes(sizes, [15], 3000), 2, 2, {})  # each greedy draw changed something
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
    want = replanned(Sizes(sizes, [], 20_000), 3, 1, {"focused:1": True, "focused:2": True})
    echo = Plan(summary="Here it is.").with_quotes(1)  # the prompt's block given back
    drawer = ViewDrawer(*[echo] * 60, suspects=2, sizes=sizes, wide=20_000)
    asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=3).attempt(1))
    asked = [a.get("view", "wide") for a in drawer.asked]
    # each suspect: its greedy draw, its pointed question in place of its first sample, its other
    # sample, and that sample's echo drawn again twice (as many as the prompt's two draws left)
    for k in (1, 2):
        assert asked.count(f"focused:{k}") == 1 + 1 + 2 and asked.count(f"pointed:{k}") == 1
    named = [v.replace("pointed", "focused") for v in asked]  # a pointed question is its suspect's draw
    compact = [v for i, v in enumerate(named) if i == 0 or v != named[i - 1]]
    assert compact == [v for i, (v, _) in enumerate(want) if i == 0 or v != want[i - 1][0]]


def test_the_plan_made_again_after_its_own_draws_is_its_own_rest():
    """Draws that tell nothing new (each missed, echo unknown) leave the rest of the plan as it was:
    planning again mid-attempt never reorders a plan by itself."""
    rng = random.Random(13)
    for _ in range(500):
        sizes, per, n = generated(rng), rng.randint(1, 5), rng.randint(1, 4)
        whole_plan = plan(sizes, per, n)
        cut = rng.randint(0, len(whole_plan))
        assert replan(sizes, per, n, [(v, None) for v, _ in whole_plan[:cut]]) == whole_plan[cut:]


def test_a_suspect_whose_greedy_draw_gave_its_code_back_is_sampled_later_and_no_more_often():
    """Its samples echo more, and each echo is drawn again: each look there costs more. The same draw
    having changed something makes its samples no later and no fewer than either."""
    rng = random.Random(17)
    moved = 0
    for _ in range(1000):
        if (drawn := a_greedy_draw(rng, 2)) is None:
            continue
        sizes, per, n, view, done = drawn

        def samples(echoed: bool | None) -> tuple[int, int]:
            rest = [v for v, _ in replan(sizes, per, n, [*done, (view, echoed)])]  # noqa: B023 (called at once)
            return (rest.index(view) if view in rest else len(rest)), rest.count(view)  # noqa: B023

        (e_at, e_count), (u_at, u_count), (c_at, c_count) = samples(True), samples(None), samples(False)
        assert e_count <= u_count <= c_count
        assert e_at >= u_at >= c_at
        moved += (e_at, e_count) != (c_at, c_count)
    assert moved > 100  # the rule is not idle on these sizes


def test_the_search_plans_again_after_a_greedy_echo_and_still_puts_the_pointed_question(tmp_path):
    """The first suspect gives its code back at temperature 0: its samples, priced as the echoes they
    mostly are, go after the second suspect's greedy draw, and its pointed question takes the place of
    its next sample. The same first reply having changed something brings its samples forward."""
    sizes = Sizes(((40, 40), (80, 80)), [], 4000)
    want = plan(sizes, 3, 1)
    assert want[:3] == [("focused:1", True), ("focused:1", False), ("focused:2", True)]
    echo = Plan(summary="Here it is.").with_quotes(1)  # the prompt's block given back
    changes = [whole(f"return a * {k}") for k in range(30)]

    def asked_after(first: Plan) -> list[tuple[str, bool]]:
        drawer = ViewDrawer(first, *changes, suspects=2, sizes=tuple(sizes.suspects), wide=4000)
        asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=3).attempt(1))
        return [(a.get("view", "wide"), a["temperature"] == 0.0) for a in drawer.asked]

    echoed = asked_after(echo)
    assert echoed[:3] == [("focused:1", True), ("focused:2", True), ("pointed:1", True)]
    assert echoed.count(("pointed:1", True)) == 1 and echoed[-1] == ("wide", True)
    assert replan(sizes, 3, 1, [("focused:1", True)])[0] == ("focused:2", True)
    changed = asked_after(changes[-1])
    assert changed[:2] == want[:2]  # its samples cheaper than the plan assumed: right after it, both
    assert changed.index(("focused:2", True)) > want.index(("focused:2", True))
    assert changed == replanned(sizes, 3, 1, {})


def test_the_cheaper_a_server_reads_the_sooner_the_wide_prompt_comes_and_never_later():
    """The order prices a prompt token at the server's measured ratio (autod.planner.pace): over
    generated plans, a server that reads faster (a GPU's 1/60 against a CPU's 1/9) never asks the wide
    prompt later. (Where a suspect's prompt also shows values it reads, cheaper reading makes that
    suspect's draw cheaper too, and it may rightly come first: suspects here show their code alone.)"""
    rng = random.Random(11)
    earlier = 0
    for _ in range(300):
        sizes = generated(rng)
        sizes = Sizes([(code, code) for code, _ in sizes.suspects], sizes.values, sizes.wide)
        per, n = rng.randint(1, 4), rng.randint(1, 4)
        cpu = plan(sizes, per, n)
        gpu = plan(Sizes(sizes.suspects, sizes.values, sizes.wide, read_per_generated=1 / 60), per, n)
        assert gpu.index(("wide", True)) <= cpu.index(("wide", True)), sizes
        earlier += gpu.index(("wide", True)) < cpu.index(("wide", True))
    assert earlier > 30  # it moves in many plans, not only in a corner


def test_the_default_ratio_is_the_order_s_constant():
    sizes = Sizes([(400, 450), (20, 30), (100, 120)], [15], 3000)
    stated = Sizes(sizes.suspects, sizes.values, sizes.wide, READ_PER_GENERATED)
    assert plan(sizes, 2, 2) == plan(stated, 2, 2)


def test_the_search_prices_reading_at_the_drawer_s_measured_ratio(tmp_path):
    sizes = ((400, 450), (20, 30), (100, 120))
    for measured in (None, 1 / 9, 1 / 60, 1 / 2):
        want = replanned(Sizes(sizes, [15], 3000, measured or READ_PER_GENERATED), 2, 2, {})
        plans = [whole(f"return a * {k}") for k in range(20)]
        drawer = ViewDrawer(*plans, suspects=3, values=1, sizes=sizes, value_sizes=(15,), wide=3000)
        drawer.read_per_generated = measured  # type: ignore[attr-defined]
        asyncio.run(search(tmp_path, drawer, Judge({}), n=2, focused=2).attempt(1))
        asked = [(a.get("view", "wide"), a["temperature"] == 0.0) for a in drawer.asked]
        assert asked == want, measured
    # the cases above differ: each ratio gives its own order, the wide prompt sooner the cheaper reading
    cpu, fast, slow = (replanned(Sizes(sizes, [15], 3000, r), 2, 2, {}) for r in (1 / 9, 1 / 60, 1 / 2))
    assert cpu != fast and cpu != slow
    assert fast.index(("wide", True)) < cpu.index(("wide", True)) < slow.index(("wide", True))


def test_each_sampled_draw_that_proposes_nothing_new_leaves_its_suspect_sooner_and_never_later():
    """A suspect's share of samples that give back the code or a change already tried is learnt from its
    own draws (Laplace's rule from the prior): over generated plans, every further such draw moves its
    next sample no sooner and leaves it no more samples; a suspect whose samples all proposed something
    keeps its samples no later than the prior would."""
    rng = random.Random(19)
    moved = 0
    for _ in range(600):
        if (drawn := a_greedy_draw(rng, 3)) is None:
            continue
        sizes, per, n, view, done = drawn
        done = [*done, (view, rng.choice([True, False]))]

        def samples(idle: dict[str, int] | None, extra: int = 0) -> tuple[int, int]:
            rest = [v for v, _ in replan(sizes, per, n, [*done, *[(view, None)] * extra], idle)]  # noqa: B023
            return (rest.index(view) if view in rest else len(rest)), rest.count(view)  # noqa: B023

        last = samples({view: 0})
        assert last == samples(None)  # none drawn yet: the prior's share either way
        for k in range(1, 7):
            now = samples({view: k})
            assert now[0] >= last[0] and now[1] <= last[1], (k, now, last)
            last = now
        moved += last != samples({view: 0})
        if per >= 3:  # one sample made that proposed something: the rest no later than the prior's
            learnt, prior_only = samples({}, 1), samples(None, 1)
            assert learnt[0] <= prior_only[0] and learnt[1] >= prior_only[1]
    assert moved > 100  # the rule is not idle on these sizes


def test_the_search_leaves_a_suspect_whose_sample_repeats_its_greedy_change(tmp_path):
    """The first suspect's greedy draw changes something that does not fix it and its sample gives the
    same change back: the plan is made again at once with what that says, and the second suspect,
    which the first plan put after three more samples of the first, is asked next. Before, the first
    suspect's samples were drawn again in place until their redraws ran out."""
    import autod.candidates.replans as replans

    sizes = Sizes(((120, 120), (240, 240)), [], 4000)
    assert plan(sizes, 4, 1)[:5] == [("focused:1", True), *[("focused:1", False)] * 3, ("focused:2", True)]

    def asked(learning: bool) -> list[tuple[str, bool]]:
        with pytest.MonkeyPatch.context() as mp:
            if not learning:  # the idle draws not counted: the plan before this rule
                real = replans.order.replan
                mp.setattr(replans.order, "replan", lambda s, p, n, d, idle=None: real(s, p, n, d))
            drawer = ViewDrawer(*[whole("return a * 7")] * 20, suspects=2, sizes=tuple(sizes.suspects),
                                wide=4000)
            asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=4).attempt(1))
        return [(a.get("view", "wide"), a["temperature"] == 0.0) for a in drawer.asked]

    before, now = asked(False), asked(True)
    assert now[:3] == [("focused:1", True), ("focused:1", False), ("focused:2", True)], now
    assert before.index(("focused:2", True)) == 8, before  # three looks and their four redraws first
    assert len(now) <= len(before)


def test_a_suspect_is_priced_at_what_its_draw_writes_never_more_than_its_definition():
    """`Sizes.written`: what a draw of each suspect generates (its head given, the early stop, two legs
    for a long one). A long third suspect whose draw writes a few lines is asked before the wide prompt;
    priced as its copy it was left to the wide prompt. Never priced above its definition; the same
    plan where it writes all of it; a suspect made cheaper never asked later."""
    copied = Sizes([(100, 100), (100, 100), (1500, 1500)], [], 6000)
    written = Sizes([(100, 100), (100, 100), (1500, 1500)], [], 6000, written=[100, 100, 60])
    assert "focused:3" not in {v for v, _ in plan(copied, 4, 4)}
    looks = plan(written, 4, 4)
    assert looks.index(("focused:3", True)) < looks.index(("wide", True))
    assert written.writes(3) == 60 and copied.writes(3) == 1500
    assert Sizes([(50, 50)], [], 900, written=[400]).writes(1) == 50  # never more than the definition
    rng = random.Random(11)
    for _ in range(300):  # written = the definition: the plan is the copy's, to the draw
        sizes = generated(rng)
        same = Sizes(sizes.suspects, sizes.values, sizes.wide, written=[c for c, _ in sizes.suspects])
        partial = Sizes(sizes.suspects, sizes.values, sizes.wide, written=[c for c, _ in sizes.suspects][:1])
        per, n = rng.randint(1, 4), rng.randint(1, 4)
        assert plan(same, per, n) == plan(sizes, per, n) == plan(partial, per, n)
        # a draw cheaper to write is never asked later: its first look moves up or stays
        k = rng.randint(1, len(sizes.suspects))
        cheaper = [c for c, _ in sizes.suspects]
        cheaper[k - 1] = max(1, cheaper[k - 1] // 10)
        before, after = plan(sizes, per, n), plan(Sizes(sizes.suspects, sizes.values, sizes.wide,
                                                        written=cheaper), per, n)
        first = (f"focused:{k}", True)
        if first in before:
            assert first in after and after.index(first) <= before.index(first)


def test_the_search_plans_with_what_the_drawer_says_each_suspect_s_draw_writes(tmp_path):
    plans = [whole(f"return a * {k}") for k in range(30)]
    drawer = ViewDrawer(*plans, suspects=3, sizes=((100, 100), (100, 100), (1500, 1500)), wide=6000)
    copied = search(tmp_path, drawer, Judge({}), n=4, focused=4).views(1)
    drawer.suspect_replies = [100, 100, 60]  # type: ignore[attr-defined]
    written = search(tmp_path, drawer, Judge({}), n=4, focused=4).views(1)
    assert "focused:3" not in {v for v, _ in copied}
    assert written.index(("focused:3", True)) < written.index(("wide", True))
