"""A suspect whose reply changed nothing is asked again another way (autod.candidates.reask), and every
draw's cost and outcome is one log line."""

from __future__ import annotations

import asyncio

import structlog.testing
from test_candidates import Judge, ViewDrawer, search, whole

from autod.candidates.reask import echoed, failing_lines, pointed_messages, reask, traced_lines
from autod.plan import Plan

EXCERPT = """____ test_add ____

    def test_add():
>       assert total([2, 3]) == 5
E       assert 4 == 5
E        +  where 4 = total([2, 3])

tests/test_calc.py:6: AssertionError
"""
CODE = "def total(xs):\n    out = 0\n    for x in xs[1:]:\n        out += x\n    return out + 1\n"


def test_an_echoed_suspect_gets_the_pointed_question_before_its_samples(tmp_path):
    echo = whole("return a - b")  # the code as it is: unchanged
    drawer = ViewDrawer(echo, *[whole(f"return a * {k}") for k in range(8)], suspects=2)
    s = search(tmp_path, drawer, Judge({}), n=1, focused=3, judged_by_behaviour=True)
    found = asyncio.run(s.attempt(1))
    asked = [(a.get("view", "wide"), a["temperature"]) for a in drawer.asked]
    assert asked == [("focused:1", 0.0), ("focused:2", 0.0),
                     ("pointed:1", 0.0), ("focused:1", 1.05),  # in place of its first sample (warmed)
                     ("focused:2", 0.8), ("focused:2", 0.8), ("wide", 0.0)]
    assert found.candidates[0].outcome == "unchanged"


def test_a_suspect_with_no_draw_left_in_the_plan_is_not_asked_again(tmp_path):
    """The pointed question takes the place of a draw the plan made for the suspect; one the plan gives
    no more draws (a long suspect of low rank, `candidates.focused: 1`) costs no more model time."""
    no_edit = Plan(summary="Here it is.").with_quotes(1)  # the prompt's block given back
    drawer = ViewDrawer(no_edit, no_edit, *[whole(f"return a * {k}") for k in range(4)], suspects=1)
    asyncio.run(search(tmp_path, drawer, Judge({}), n=2, focused=1).attempt(1))
    asked = [(a.get("view", "wide"), a["temperature"]) for a in drawer.asked]
    assert asked == [("focused:1", 0.0), ("wide", 0.0), ("wide", 0.8)]
    views = [("focused:1", True), ("focused:2", True), ("wide", True)]
    assert not reask(views, 0, "focused:1", True) and views[1:] == [("focused:2", True), ("wide", True)]


def test_a_reply_that_changes_something_or_declines_is_sampled_as_before(tmp_path):
    views = [("focused:1", True), ("focused:1", False), ("wide", True)]
    assert not reask(views, 0, "focused:1", False) and not reask(views, 2, "wide", True)
    assert views == [("focused:1", True), ("focused:1", False), ("wide", True)]
    assert echoed("unchanged", None) and echoed("no_change", Plan(summary="x").with_quotes(2))
    assert not echoed("no_change", Plan(summary="no safe fix")) and not echoed("rolled_back", None)
    drawer = ViewDrawer(Plan(summary="no safe fix"), *[whole(f"return a * {k}") for k in range(4)])
    asyncio.run(search(tmp_path, drawer, Judge({}), n=1, focused=2).attempt(1))
    assert [a.get("view", "wide") for a in drawer.asked] == ["focused:1", "focused:1", "wide"]


def test_the_pointed_question_names_the_failing_assertion_and_the_traced_lines():
    assert failing_lines(EXCERPT) == (">       assert total([2, 3]) == 5\nE       assert 4 == 5\n"
                                      "E        +  where 4 = total([2, 3])")
    inner = EXCERPT.replace(">       assert", "        assert") + ">       for x in xs[1:]:\nE   Boom\n"
    assert traced_lines(inner, CODE) == "    for x in xs[1:]:"
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "The check fails."}]
    out = pointed_messages(messages, {"symbol": "total", "code": CODE, "excerpt": inner})
    assert out[0] == messages[0] and len(out) == 2 and messages[1]["content"] == "The check fails."
    text = out[1]["content"]
    assert text.startswith("The check fails.\n") and "Returned as it is, `total` fails" in text
    assert "E   Boom" in text and "```python\n    for x in xs[1:]:\n```" in text


def test_every_draw_logs_its_cost_and_outcome_in_one_line(tmp_path):
    drawer = ViewDrawer(whole("return a * b"), whole("return a + b"), suspects=1)
    with structlog.testing.capture_logs() as logs:
        asyncio.run(search(tmp_path, drawer, Judge({"a + b": "fixed"}), n=1, focused=2).attempt(1))
    lines = [e for e in logs if e["event"] == "candidates.judged"]
    assert [(e["outcome"], e["view"], e["tokens"], e["temperature"]) for e in lines] == [
        ("rolled_back", "focused:1", 110, 0.0), ("fixed", "focused:1", 110, 0.8)]
    assert all(isinstance(e["model_s"], float) and isinstance(e["checks_s"], float) for e in lines)
