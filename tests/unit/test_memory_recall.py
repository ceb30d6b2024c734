"""Recall scoring and packing (pure functions)."""

from __future__ import annotations

import pytest

from autod.memory import Recalled, Tier
from autod.memory.recall import (
    Hit,
    estimate_tokens,
    outcome_factor,
    pack,
    rank,
    recency_decay,
    score,
    similarity_from_distance,
)

NOW = 1_700_000_000.0
DAY = 86400.0


def hit(id: str, tier: Tier, sim: float, *, text: str | None = None, **meta: object) -> Hit:
    meta.setdefault("ts", NOW)
    body = text if text is not None else f"text of {id}"
    return Hit(id=id, tier=tier, text=body, similarity=sim, metadata=meta)


def test_cosine_distance_maps_to_similarity() -> None:
    assert similarity_from_distance(0.0) == 1.0
    assert similarity_from_distance(0.25) == 0.75


def test_n0_halves_after_a_day_and_n1_after_thirty_and_lessons_never_decay() -> None:
    assert recency_decay(Tier.N0, NOW - DAY, NOW) == pytest.approx(0.5)
    assert recency_decay(Tier.N1, NOW - 30 * DAY, NOW) == pytest.approx(0.5)
    assert recency_decay(Tier.N2, NOW - 3650 * DAY, NOW) == 1.0


def test_future_timestamps_do_not_boost_an_item() -> None:
    assert recency_decay(Tier.N0, NOW + DAY, NOW) == 1.0


def test_outcome_factor_rewards_lessons_that_worked_and_fixed_episodes() -> None:
    assert outcome_factor(Tier.N2, {"uses": 3, "successes": 3}) == pytest.approx(1.75)
    assert outcome_factor(Tier.N2, {"uses": 3, "successes": 0}) == 1.0
    assert outcome_factor(Tier.N1, {"status": "fixed"}) == pytest.approx(1.2)
    assert outcome_factor(Tier.N1, {"status": "rolled_back"}) == 1.0
    assert outcome_factor(Tier.N0, {"status": "fixed"}) == 1.0


def test_equal_similarity_ranks_lesson_over_episode_over_observation() -> None:
    ranked = rank([hit("o", Tier.N0, 0.8), hit("e", Tier.N1, 0.8), hit("l", Tier.N2, 0.8, uses=1)], NOW)
    assert [r.id for r in ranked] == ["l", "e", "o"]


def test_lesson_that_led_to_a_fix_outranks_a_closer_one_that_did_not() -> None:
    worked = hit("worked", Tier.N2, 0.80, uses=2, successes=2)
    failed = hit("failed", Tier.N2, 0.85, uses=2, successes=0)
    assert [r.id for r in rank([failed, worked], NOW)] == ["worked", "failed"]


def test_old_observation_decays_below_a_fresh_less_similar_one() -> None:
    old = hit("old", Tier.N0, 0.9, ts=NOW - 3 * DAY)
    fresh = hit("fresh", Tier.N0, 0.6, ts=NOW - 60)
    ranked = rank([old, fresh], NOW)
    assert [r.id for r in ranked] == ["fresh", "old"]
    assert ranked[1].score == pytest.approx(0.9 * 0.6 * 0.125)


def test_negative_similarity_scores_zero_even_with_bonuses() -> None:
    assert score(hit("x", Tier.N2, -0.3, uses=1, successes=1), NOW) == 0.0


def test_identical_texts_keep_only_the_best_copy() -> None:
    ranked = rank([hit("a", Tier.N0, 0.7, text="same"), hit("b", Tier.N0, 0.9, text=" same ")], NOW)
    assert [r.id for r in ranked] == ["b"]


def test_token_estimate_is_chars_over_four_plus_framing() -> None:
    assert estimate_tokens("x" * 40) == 18
    assert estimate_tokens("") == 8


def r(id: str, chars: int, score: float) -> Recalled:
    return Recalled(id=id, tier=Tier.N1, text="x" * chars, score=score)


def test_pack_takes_the_best_first_within_budget() -> None:
    ranked = [r("a", 40, 0.9), r("b", 40, 0.8), r("c", 40, 0.7)]  # 18 tokens each
    assert [x.id for x in pack(ranked, 40, 8)] == ["a", "b"]


def test_pack_skips_an_item_too_big_and_keeps_a_smaller_later_one() -> None:
    ranked = [r("big", 400, 0.9), r("small", 8, 0.5)]  # 108 and 10 tokens
    assert [x.id for x in pack(ranked, 50, 8)] == ["small"]


def test_pack_stops_at_k_and_empty_budget_gives_nothing() -> None:
    ranked = [r(str(i), 4, 1.0 - i / 10) for i in range(5)]
    assert [x.id for x in pack(ranked, 10_000, 3)] == ["0", "1", "2"]
    assert pack(ranked, 0, 3) == []


# -- memory that helps: floor, noise, episodes, share -------------------------------------------

PYTEST_RUN = """\
tests/test_calc.py ....F..                                              [ 42%]
tests/test_more.py .........                                            [100%]
=================================== FAILURES ===================================
E       assert -1 == 5
tests/test_calc.py:7: AssertionError
========================= 1 failed, 15 passed in {t}s =========================
"""


def test_items_below_the_similarity_floor_are_not_recalled() -> None:
    hits = [hit("close", Tier.N2, 0.8), hit("far", Tier.N2, 0.2)]
    assert [r.id for r in rank(hits, NOW, min_similarity=0.35)] == ["close"]


def test_the_same_output_at_another_time_is_one_memory() -> None:
    a = hit("a", Tier.N0, 0.9, text=PYTEST_RUN.format(t="0.12"))
    b = hit("b", Tier.N0, 0.8, text=PYTEST_RUN.format(t="3.40"))
    assert [r.id for r in rank([a, b], NOW)] == ["a"]


def test_recalled_text_drops_progress_noise_and_what_the_prompt_already_shows() -> None:
    from autod.memory.recall import render_recalled

    seen = Recalled("o1", Tier.N0, PYTEST_RUN.format(t="0.1"), 0.9)
    lesson = Recalled("l1", Tier.N2, "[auto-debug] Failure: calc. Tried: use +. Outcome: it worked.", 0.8)
    text = render_recalled([seen, lesson], shown=PYTEST_RUN.format(t="0.5"))
    assert text == "- (lesson) [auto-debug] Failure: calc. Tried: use +. Outcome: it worked."
    alone = render_recalled([seen])
    assert "[ 42%]" not in alone and "....F.." not in alone and "0.1s" not in alone
    assert "assert -1 == 5" in alone


def test_an_old_json_episode_is_shown_as_sentences_not_as_a_shape_to_copy() -> None:
    from autod.memory.recall import render_recalled

    raw = (
        '{"event": "check tests failed", "plan": "swap the operator", "status": "rolled_back",'
        ' "reason": "checks still fail", "edits": [{"path": "src/calc.py", "added": 1, "removed": 1}]}'
    )
    text = render_recalled([Recalled("e1", Tier.N1, raw, 0.9)])
    assert "{" not in text and '"edits"' not in text
    assert "Tried: swap the operator." in text and "Changed src/calc.py (+1 -1)." in text
    assert "Outcome: rolled_back (checks still fail)." in text


def test_memory_never_takes_more_than_its_share_of_the_prompt(tmp_path) -> None:
    from autod.config.settings import Settings
    from autod.memory.recall import render_recalled
    from autod.modes import memory_budget

    s = Settings(workspace=tmp_path, memory={"max_prompt_share": 0.1, "recall_tokens": 5000})
    budget = memory_budget(s, 6000)
    assert budget == 600
    items = [Recalled(f"l{i}", Tier.N2, f"lesson {i}: " + "word " * 200, 0.9) for i in range(10)]
    text = render_recalled(items, budget_tokens=budget)
    assert 0 < estimate_tokens(text) <= budget and text.count("- (lesson)") == 2


def test_a_focused_prompt_gets_a_short_line_per_episode_and_lesson_and_no_observation():
    from autod.memory.recall import render_brief

    episode = ("Failure: test_add fails. Tried: multiply the operands. Outcome: rolled_back.\n"
               "The change:\n-    return a - b\n+    return a * b")
    items = [
        Recalled("o", Tier.N0, "check_failed: test_add fails\nE assert -1 == 5", 1.0),
        Recalled("e", Tier.N1, episode, 0.9),
        Recalled("l", Tier.N2,
                 "[auto-debug] Failure: x. Tried: y. Outcome: it did NOT work and was rolled back.",
                 0.8, {"polarity": "failure"}),
        Recalled("w", Tier.N2, "[auto-debug] Failure: x. Tried: z. Outcome: it worked: the checks pass.", 0.7,
                 {"polarity": "success"}),
    ]
    text = render_brief(items, budget_tokens=1000)
    lines = text.splitlines()
    assert lines == [
        "- (earlier attempt) Failure: test_add fails. Tried: multiply the operands. Outcome: rolled_back.",
        "- (did not work) Failure: x. Tried: y. Outcome: it did NOT work and was rolled back.",
        "- (lesson) Failure: x. Tried: z. Outcome: it worked: the checks pass.",
    ]
    assert len(render_brief(items, budget_tokens=40).splitlines()) == 1  # the budget holds one line
