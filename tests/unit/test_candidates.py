"""The candidate search at its seams: a scripted drawer, the real act rules, a scripted validator."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from autod.act.edits import Caps, FileChange, prepare
from autod.candidates.search import MAX_TEMPERATURE, SAME_CODE, CandidateSearch
from autod.config.settings import CandidatesConfig
from autod.modes import Verification
from autod.plan import Edit, Plan
from autod.planner import PlanResult, TokenUsage
from autod.safety.boundary import Boundary

SRC = "def add(a, b):\n    return a - b\n"


def whole(body: str) -> Plan:
    edit = Edit(path="calc.py", symbol="add", replace=f"def add(a, b):\n    {body}\n")
    return Plan(summary=body, edits=[edit])


class Drawer:
    def __init__(self, *plans: Plan, choices: int = 1) -> None:
        self.plans = list(plans)
        self.asked: list[dict[str, Any]] = []
        self.choices = choices

    async def ask(self, **kw: Any) -> PlanResult:
        self.asked.append(kw)
        got = [self.plans.pop(0) for _ in range(min(kw.get("n", 1), self.choices, len(self.plans)))]
        return PlanResult(got[0], TokenUsage(100, 10), alternatives=got[1:])


class ViewDrawer(Drawer):
    """A drawer whose mode has a focused view (autod.candidates.Asker with Sections.focused)."""

    has_focus = True

    def __init__(self, *plans: Plan, choices: int = 1, suspects: int = 1, values: int = 0,
                 sizes: tuple[tuple[int, int], ...] = (), value_sizes: tuple[int, ...] = (),
                 wide: int = 0) -> None:
        super().__init__(*plans, choices=choices)
        self.suspects = suspects
        self.value_suspects = values
        self.suspect_sizes = sizes  # not known: the fixed order
        self.value_sizes = value_sizes
        self.wide_tokens = wide


class Judge:
    """Verdicts by the new source: what a check would say of each candidate."""

    in_place = False

    def __init__(self, verdicts: dict[str, str]) -> None:
        self.verdicts = verdicts
        self.seen: list[str] = []

    async def validate(self, plan: Plan, changes: list[FileChange]) -> Verification:
        text = changes[0].new.decode()
        self.seen.append(text)
        status = next((v for k, v in self.verdicts.items() if k in text), "rolled_back")
        return Verification(status, [], "" if status == "fixed" else "checks still fail")


def search(tmp_path: Path, drawer: Drawer, judge: Judge, **cfg: Any) -> CandidateSearch:
    (tmp_path / "calc.py").write_text(SRC)
    boundary = Boundary(tmp_path, tmp_path / ".autod", [])

    async def prep(plan: Plan) -> tuple[list[FileChange], str]:
        return prepare(plan, boundary, Caps(10, 100, 100_000)), ""

    same = cfg.pop("judged_by_behaviour", False)
    retry = cfg.pop("retry", 0)
    return CandidateSearch(CandidatesConfig(**{"n": 4, "seed": 10, **cfg}), drawer, prep, judge,
                           judged_by_behaviour=same, retry=retry)


def test_the_first_candidate_that_fixes_everything_stops_the_search(tmp_path):
    drawer = Drawer(whole("return a * b"), whole("return a + b"), whole("return b + a"))
    judge = Judge({"a + b": "fixed"})
    found = asyncio.run(search(tmp_path, drawer, judge).attempt(1))
    assert [c.outcome for c in found.candidates] == ["rolled_back", "fixed"]
    assert found.winner is found.candidates[1]
    assert [(a["seed"], a["temperature"]) for a in drawer.asked] == [(10, 0.0), (11, 0.8)]
    assert len(drawer.plans) == 1  # never drawn: the search stopped


def test_fixed_beats_improved_and_ties_go_to_votes_then_the_smaller_diff(tmp_path):
    big = Plan(summary="big", edits=[Edit(path="calc.py", symbol="add",
                                          replace="def add(a, b):\n    c = a\n    return c + b // 1\n")])
    drawer = Drawer(big, whole("return a + b  # x"), whole("return a+b"), whole("return b * 1 + a"),
                    whole("return b + a"))
    judge = Judge({"c + b": "improved", "a + b": "improved", "a+b": "improved", "b * 1": "improved",
                   "b + a": "improved"})
    found = asyncio.run(search(tmp_path, drawer, judge).attempt(1))
    # "return a + b  # x" and "return a+b" are one change by AST: a duplicate is a vote (and is
    # redrawn: it is not one of the n)
    assert [c.outcome for c in found.candidates] == ["improved", "improved", "duplicate", *["improved"] * 2]
    assert found.winner is found.candidates[1] and found.winner.votes == 2


def test_a_repeated_change_is_never_verified_twice_and_warms_the_next_draw(tmp_path):
    same = [whole("return a * b") for _ in range(8)]
    drawer, judge = Drawer(*same), Judge({})
    found = asyncio.run(search(tmp_path, drawer, judge, temperature=0.6).attempt(1))
    # n (4) repeats are redrawn, the next three count among the n: 1 + 4 + 3 draws, one check run
    assert [c.outcome for c in found.candidates] == ["rolled_back", *["duplicate"] * 7]
    assert len(judge.seen) == 1 and not drawer.plans
    temps = [a["temperature"] for a in drawer.asked]
    assert temps[0] == 0.0 and temps[1] == 0.6 and temps[1] < temps[2] < temps[3] <= MAX_TEMPERATURE
    assert max(temps) == MAX_TEMPERATURE


def test_a_server_that_takes_n_is_asked_once_for_the_rest(tmp_path):
    drawer = Drawer(whole("return a * b"), whole("return a - b - 0"), whole("return a + b"), choices=3)
    found = asyncio.run(search(tmp_path, drawer, Judge({"a + b": "fixed"}), n=3).attempt(1))
    assert [a["n"] for a in drawer.asked] == [1, 2]
    assert [c.seed for c in found.candidates] == [10, 11, 12]
    assert found.winner is not None and found.winner.outcome == "fixed"


def test_refused_and_unchanged_candidates_are_dropped_before_verification(tmp_path):
    missing = Plan(summary="x", edits=[Edit(path="calc.py", search="not there", replace="y")])
    drawer = Drawer(missing, whole("return a - b"), Plan(summary="no idea", edits=[]), whole("return a + b"))
    judge = Judge({"a + b": "fixed"})
    found = asyncio.run(search(tmp_path, drawer, judge).attempt(1))
    assert [c.outcome for c in found.candidates] == ["refused", "unchanged", "no_change", "fixed"]
    assert len(judge.seen) == 1
    assert "search text not found" in found.candidates[0].reason


def test_a_sampled_draw_that_proposes_no_edit_does_not_use_up_one_of_the_n(tmp_path):
    # a small model at temperature 0.8 often echoes the prompt's failure section, or writes prose
    # alone: such a draw is recorded, and another is drawn with the next seed in its place
    idle = Plan(summary="### Failure: check tests failed", edits=[])
    drawer = Drawer(whole("return a * b"), idle, idle, whole("return a // b"), whole("return a + b"))
    found = asyncio.run(search(tmp_path, drawer, Judge({"a + b": "fixed"}), n=3).attempt(1))
    assert [c.outcome for c in found.candidates] == ["rolled_back", "no_change", "no_change", "rolled_back",
                                                     "fixed"]
    assert [a["seed"] for a in drawer.asked] == [10, 11, 12, 13, 14]
    assert found.winner is found.candidates[-1]


def test_a_sampled_draw_that_copies_the_code_back_or_repeats_a_change_is_redrawn(tmp_path):
    # the code given back as it is, or a change already verified, tells nothing new: another draw,
    # with the next seed, takes its place among the n
    drawer = Drawer(whole("return a * b"), whole("return a - b"), whole("return a*b"), whole("return a // b"),
                    whole("return a + b"))
    found = asyncio.run(search(tmp_path, drawer, Judge({"a + b": "fixed"}), n=3).attempt(1))
    assert [c.outcome for c in found.candidates] == ["rolled_back", "unchanged", "duplicate", "rolled_back",
                                                     "fixed"]
    assert [a["seed"] for a in drawer.asked] == [10, 11, 12, 13, 14]
    assert found.winner is found.candidates[-1]


def test_draws_that_propose_nothing_are_redrawn_n_times_at_most(tmp_path):
    idle = Plan(summary="no idea", edits=[])
    drawer = Drawer(whole("return a * b"), *[idle] * 8, whole("return a + b"))
    found = asyncio.run(search(tmp_path, drawer, Judge({"a + b": "fixed"}), n=3).attempt(1))
    # 3 sampled no-edit draws are replaced; the 4th and 5th count among the n: 1 + 3 + 2 draws
    assert [c.outcome for c in found.candidates] == ["rolled_back", *["no_change"] * 5]
    assert found.winner is None and len(drawer.asked) == 6


@pytest.mark.slow
def test_a_plan_autod_fails_on_is_dropped_and_the_search_goes_on(tmp_path):
    drawer = Drawer(whole("return a * 1"), whole("return a + b"))
    search_ = search(tmp_path, drawer, Judge({"a + b": "fixed"}))
    real = search_.prepare
    calls = 0

    async def flaky(plan):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise IndexError("a bug in autod")
        return await real(plan)

    search_.prepare = flaky
    found = asyncio.run(search_.attempt(1))
    assert [c.outcome for c in found.candidates] == ["refused", "fixed"]
    assert "internal error while applying the plan (IndexError)" in found.candidates[0].reason


def test_a_rewrite_that_changes_only_quotes_or_spacing_is_unchanged_and_never_verified(tmp_path):
    (tmp_path / "calc.py").write_text(SRC)
    quotes = Plan(summary="q", edits=[Edit(path="calc.py", symbol="add",
                                           replace="def add(a, b):\n    return a  -  b  # fixed?\n")])
    drawer = Drawer(quotes, whole("return a + b"))
    judge = Judge({"a + b": "fixed"})
    found = asyncio.run(search(tmp_path, drawer, judge, judged_by_behaviour=True).attempt(1))
    assert [c.outcome for c in found.candidates] == ["unchanged", "fixed"]
    assert found.candidates[0].reason == SAME_CODE and len(judge.seen) == 1
    from autod.candidates.settle import unchanged

    told = unchanged(found)[0].output
    assert "changed only quotes, spacing or comments" in told and "a  -  b" not in told


def test_without_the_flag_a_comment_is_a_change_worth_verifying(tmp_path):
    commented = Plan(summary="c", edits=[Edit(path="calc.py", symbol="add",
                                              replace="def add(a, b):\n    return a - b  # why\n")])
    drawer = Drawer(commented, whole("return a + b"))
    found = asyncio.run(search(tmp_path, drawer, Judge({"a + b": "fixed"})).attempt(1))
    assert found.candidates[0].outcome == "rolled_back"


def test_a_fix_that_inlines_a_constant_does_not_end_the_search_and_wins_only_alone(tmp_path):
    def scaled(body: str) -> Plan:
        return Plan(summary=body, edits=[Edit(path="calc.py", symbol="add",
                                              replace=f"def add(a, b):\n    {body}\n")])

    def run(*plans: Plan) -> Any:
        s = search(tmp_path, Drawer(*plans), Judge({"b * 1": "fixed", "+ b": "fixed"}),
                   judged_by_behaviour=True)
        (tmp_path / "calc.py").write_text("K = 2\n\n\ndef add(a, b):\n    return a - b * K\n")
        return asyncio.run(s.attempt(1))

    found = run(scaled("return a - b * 1"), scaled("return a + b"), scaled("return b"), scaled("return a"))
    assert [c.outcome for c in found.candidates] == ["fixed", "fixed"]  # the clean fix ends the search
    assert "K" in found.candidates[0].suspect and found.winner is found.candidates[1]
    alone = run(scaled("return a - b * 1"), scaled("return b"), scaled("return a"), scaled("return 0"))
    assert [c.outcome for c in alone.candidates] == ["fixed", "rolled_back", "rolled_back", "rolled_back"]
    assert alone.winner is alone.candidates[0]  # nothing better: the fix in hand is kept


@pytest.mark.slow
def test_a_crash_in_the_suspect_check_never_costs_the_candidate(tmp_path, monkeypatch):
    import autod.candidates.search as search_mod

    def broken(changes):
        raise AttributeError("a bug in autod's heuristic")

    monkeypatch.setattr(search_mod, "symptom_patch", broken)
    s = search(tmp_path, Drawer(whole("return a + b")), Judge({"a + b": "fixed"}), judged_by_behaviour=True)
    found = asyncio.run(s.attempt(1))
    assert found.winner is not None and found.winner.outcome == "fixed" and not found.winner.suspect


def test_focused_draws_come_first_each_view_opening_at_temperature_0_then_the_wide_prompt(tmp_path):
    plans = [whole(f"return a * {k}") for k in range(4)]
    drawer = ViewDrawer(*plans)  # one suspect
    found = asyncio.run(search(tmp_path, drawer, Judge({}), n=2, focused=2).attempt(1))
    asked = [(a.get("view", "wide"), a["seed"], a["temperature"]) for a in drawer.asked]
    # each prompt's ith draw uses seed + i
    assert asked == [("focused:1", 10, 0.0), ("focused:1", 11, 0.8), ("wide", 10, 0.0), ("wide", 11, 0.8)]
    assert [c.view for c in found.candidates] == ["focused:1", "focused:1", "wide", "wide"]
    assert [c.record()["view"] for c in found.candidates] == ["focused:1", "focused:1", "wide", "wide"]


def test_every_suspect_is_asked_first_at_temperature_0_then_each_ones_sampled_draws_then_the_wide_prompt(
        tmp_path):
    """All of a suspect's draws come in the cycle's first attempt, before the wide prompt: first every
    suspect once at temperature 0, in rank order, then the top-ranked one's sampled draws, then the
    next one's (its prompt stays in the server's cache). A later attempt asks the wide prompt only:
    the suspects' prompts do not tell the attempts so far."""
    plans = [whole(f"return a * {k}") for k in range(20)]
    drawer = ViewDrawer(*plans, suspects=3)
    s = search(tmp_path, drawer, Judge({}), n=2, focused=3)
    asyncio.run(s.attempt(1))
    asyncio.run(s.attempt(2))
    asked = [(a.get("view", "wide"), a["seed"], a["temperature"]) for a in drawer.asked]
    assert asked == [("focused:1", 10, 0.0), ("focused:2", 10, 0.0), ("focused:3", 10, 0.0),
                     ("focused:1", 11, 0.8), ("focused:1", 12, 0.8), ("focused:2", 11, 0.8),
                     ("focused:2", 12, 0.8), ("focused:3", 11, 0.8), ("focused:3", 12, 0.8),
                     ("wide", 10, 0.0), ("wide", 11, 0.8),
                     ("wide", 12, 0.0), ("wide", 13, 0.8)]


def test_each_value_suspect_is_asked_once_at_temperature_0_after_every_suspects_first_draw(tmp_path):
    """A value is the less likely place of the bug, and its prompt a few lines long: its one draw comes
    once every suspect definition had its first, before their sampled draws. The value draws move no
    suspect's seeds: each prompt's draws are numbered on their own."""
    plans = [whole(f"return a * {k}") for k in range(20)]
    drawer = ViewDrawer(*plans, suspects=3, values=2)
    s = search(tmp_path, drawer, Judge({}), n=2, focused=2)
    asyncio.run(s.attempt(1))
    asyncio.run(s.attempt(2))
    asked = [(a.get("view", "wide"), a["seed"], a["temperature"]) for a in drawer.asked]
    assert asked == [("focused:1", 10, 0.0), ("focused:2", 10, 0.0), ("focused:3", 10, 0.0),
                     ("value:1", 10, 0.0), ("value:2", 10, 0.0),
                     ("focused:1", 11, 0.8), ("focused:2", 11, 0.8), ("focused:3", 11, 0.8),
                     ("wide", 10, 0.0), ("wide", 11, 0.8), ("wide", 12, 0.0), ("wide", 13, 0.8)]
    drawer = ViewDrawer(*plans, suspects=2, values=1)
    asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=4).attempt(1))
    assert [a.get("view", "wide") for a in drawer.asked] == [
        "focused:1", "focused:2", "value:1", *["focused:1"] * 3, *["focused:2"] * 3, "wide"]
    # no focused draws (candidates.focused: 0): no value draws either
    drawer = ViewDrawer(*plans, suspects=2, values=1)
    asyncio.run(search(tmp_path, drawer, Judge({}), n=2, focused=0).attempt(1))
    assert [a.get("view", "wide") for a in drawer.asked] == ["wide", "wide"]


def test_a_later_cycle_on_the_same_failure_samples_its_first_attempt_with_seeds_past_the_earlier_ones(
        tmp_path):
    plans = [whole(f"return a * {k}") for k in range(20)]
    drawer = ViewDrawer(*plans, suspects=2, values=1)
    s = search(tmp_path, drawer, Judge({}), n=2, focused=2, retry=2)
    asyncio.run(s.attempt(1))
    asyncio.run(s.attempt(2))
    asked = [(a.get("view", "wide"), a["seed"], a["temperature"]) for a in drawer.asked]
    assert asked == [("focused:1", 2010, 0.8), ("focused:2", 2010, 0.8), ("value:1", 2010, 0.8),
                     ("focused:1", 2011, 0.8), ("focused:2", 2011, 0.8),
                     ("wide", 2010, 0.8), ("wide", 2011, 0.8),
                     ("wide", 2012, 0.0), ("wide", 2013, 0.8)]  # told this cycle's first attempt


def test_a_prompt_that_repeats_itself_warms_and_redraws_only_its_own_draws(tmp_path):
    """The first suspect's prompt gives the code back when sampled: its next draws are warmer and
    redrawn (as often as it has draws, at most); the second suspect's draws are sampled as
    configured, with their own seeds."""
    back = whole("return a - b")  # the code as it is: unchanged
    plans = [whole("return a * 1"), whole("return a * 2"), *[back] * 4, whole("return a * 3"),
             whole("return a * 4"), whole("return a * 5"), whole("return a * 6")]
    drawer = ViewDrawer(*plans, suspects=2)
    found = asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=3).attempt(1))
    asked = [(a.get("view", "wide"), a["seed"], a["temperature"]) for a in drawer.asked]
    assert [c.outcome for c in found.candidates][2:6] == ["unchanged"] * 4
    assert asked[:2] == [("focused:1", 10, 0.0), ("focused:2", 10, 0.0)]
    f1 = [(seed, t) for v, seed, t in asked[2:] if v == "focused:1"]
    # 2 sampled draws + up to 3 redraws; the 4th "unchanged" counts among its two
    assert [seed for seed, _ in f1] == [11, 12, 13, 14, 15]
    assert [t for _, t in f1][:2] == [0.8, 1.05] and max(t for _, t in f1) == MAX_TEMPERATURE
    assert [(v, seed, t) for v, seed, t in asked if v == "focused:2"][1:] == [
        ("focused:2", 11, 0.8), ("focused:2", 12, 0.8)]


def test_a_fix_from_the_focused_view_ends_the_search_before_the_wide_prompt_is_sent(tmp_path):
    drawer = ViewDrawer(whole("return a + b"), whole("return a * b"))
    found = asyncio.run(search(tmp_path, drawer, Judge({"a + b": "fixed"}), focused=2).attempt(1))
    assert found.winner is not None and found.winner.view == "focused:1"
    assert [a.get("view") for a in drawer.asked] == ["focused:1"]


def test_the_n_wide_draws_follow_the_focused_ones_and_without_a_focused_view_all_are_wide(tmp_path):
    def views(drawer: Drawer, **cfg: Any) -> list[str]:
        s = search(tmp_path, drawer, Judge({}), **cfg)
        asyncio.run(s.attempt(1))
        return [a.get("view", "wide") for a in drawer.asked]

    plans = [whole(f"return a * {k}") for k in range(4)]
    suspects = ["focused:1", "focused:2", "focused:3"]
    assert views(ViewDrawer(*plans, suspects=3), n=1, focused=1) == [*suspects, "wide"]
    assert views(ViewDrawer(*plans), n=4, focused=0) == ["wide"] * 4
    assert views(Drawer(*plans), n=4, focused=2) == ["wide"] * 4  # the mode has no focused view


def test_a_server_that_takes_n_gets_each_views_rest_in_one_request(tmp_path):
    plans = [whole(f"return a * {k}") for k in range(6)]
    drawer = ViewDrawer(*plans, choices=3)
    found = asyncio.run(search(tmp_path, drawer, Judge({}), n=3, focused=3).attempt(1))
    assert [(a.get("view", "wide"), a["n"]) for a in drawer.asked] == [
        ("focused:1", 1), ("focused:1", 2), ("wide", 1), ("wide", 2)]
    assert [c.seed for c in found.candidates] == [10, 11, 12, 10, 11, 12]
    assert [c.view for c in found.candidates] == ["focused:1"] * 3 + ["wide"] * 3



def test_a_drawer_whose_replies_are_watched_gets_a_suspects_samples_one_choice_a_request(tmp_path):
    """A request for several choices forgoes the early stop, the head given and the two legs: the
    first sampled batch of a cycle on a server that answers one choice (llama.cpp) was a whole copy."""
    plans = [whole(f"return a * {k}") for k in range(6)]
    drawer = ViewDrawer(*plans, choices=3)
    drawer.one_choice = True  # type: ignore[attr-defined]
    found = asyncio.run(search(tmp_path, drawer, Judge({}), n=3, focused=3).attempt(1))
    assert [(a.get("view", "wide"), a["n"]) for a in drawer.asked] == [
        ("focused:1", 1), ("focused:1", 1), ("focused:1", 1), ("wide", 1), ("wide", 2)]  # the wide, batched
    assert [c.seed for c in found.candidates] == [10, 11, 12, 10, 11, 12]


def test_the_asker_asks_one_choice_a_request_where_its_replies_are_watched():
    from types import SimpleNamespace

    from autod.candidates.asker import Asker

    for form, stop_early, want in (("code", True, True), ("code", False, False), ("json", True, False)):
        settings = SimpleNamespace(llm=SimpleNamespace(stop_early=stop_early))
        asker = SimpleNamespace(form=form, settings=settings)
        assert Asker.one_choice.fget(asker) is want  # type: ignore[attr-defined]


VALUES = "WIDTH = 8\nFLAG = False\nNAME = 'x'\n\n\ndef add(a, b):\n    return a - b\n"
ALL_CHANGED = Plan(summary="three values", edits=[
    Edit(path="calc.py", symbol=name, replace=line)
    for name, line in (("WIDTH", "WIDTH = 9"), ("FLAG", "FLAG = True"), ("NAME", "NAME = 'y'"))])


def test_a_value_groups_reply_changing_several_values_is_tried_one_change_at_a_time_first(tmp_path):
    """Asked for the wrong value alone, the model changed all three: each change alone is checked
    (no model time, no tokens, not a draw), in the reply's order, and the one that fixes ends it."""
    drawer = ViewDrawer(Plan(summary="no idea", edits=[]), ALL_CHANGED, suspects=1, values=1)
    s = search(tmp_path, drawer, Judge({"FLAG = True\nNAME = 'x'": "fixed"}), n=1, focused=1)
    (tmp_path / "calc.py").write_text(VALUES)
    found = asyncio.run(s.attempt(1))
    assert [(c.view, c.outcome, c.part) for c in found.candidates] == [
        ("focused:1", "no_change", False), ("value:1", "rolled_back", True), ("value:1", "fixed", True)]
    assert found.winner is found.candidates[2] and found.winner.diff_lines == 2
    assert [c.record().get("part") for c in found.candidates] == [None, True, True]
    assert found.candidates[1].tokens == 0
    assert [a.get("view") for a in drawer.asked] == ["focused:1", "value:1"]
    assert (tmp_path / "calc.py").read_text() == VALUES  # judged on the side: the tree is the validator's


def test_when_no_change_alone_fixes_it_the_reply_whole_is_tried_and_only_a_value_groups_is_split(tmp_path):
    drawer = ViewDrawer(Plan(summary="no idea", edits=[]), ALL_CHANGED, suspects=1, values=1)
    judge = Judge({"WIDTH = 9\nFLAG = True\nNAME = 'y'": "fixed"})
    s = search(tmp_path, drawer, judge, n=1, focused=1)
    (tmp_path / "calc.py").write_text(VALUES)
    found = asyncio.run(s.attempt(1))
    assert [(c.outcome, c.part) for c in found.candidates[1:]] == [
        ("rolled_back", True), ("rolled_back", True), ("rolled_back", True), ("fixed", False)]
    # the same reply from the wide prompt is one candidate
    drawer = Drawer(ALL_CHANGED)
    s = search(tmp_path, drawer, Judge({}), n=1)
    (tmp_path / "calc.py").write_text(VALUES)
    assert [c.part for c in asyncio.run(s.attempt(1)).candidates] == [False]
