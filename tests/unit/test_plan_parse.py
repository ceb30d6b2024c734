"""Finding and validating the plan JSON in LLM replies."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autod.errors import PlanInvalid
from autod.plan import Plan
from autod.planner.parse import MAX_REASON, extract_json, parse_plan

PLAN = {
    "summary": "guard the division",
    "edits": [{"path": "src/calc.py", "search": "return a / b", "replace": "return a / b if b else 0"}],
    "verify": ["tests"],
    "report": None,
}


def reason_of(text: str) -> str:
    with pytest.raises(PlanInvalid) as info:
        parse_plan(text)
    return info.value.reason


def test_bare_json_plan_parses():
    plan = parse_plan(json.dumps(PLAN))
    assert plan.edits[0].path == "src/calc.py"
    assert plan.verify == ["tests"]


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```", "```JSON {} ```"])
def test_fenced_plan_parses(fence):
    text = "Here you go:\n" + fence.replace("{}", json.dumps(PLAN, indent=2)) + "\nDone."
    assert parse_plan(text).summary == PLAN["summary"]


def test_prose_with_braces_around_the_plan_is_ignored():
    text = f"I will use {{this approach}} and {{that}}.\n{json.dumps(PLAN)}\nHope it helps {{really}}."
    assert parse_plan(text).summary == PLAN["summary"]


def test_trailing_prose_after_bare_json_is_ignored():
    assert parse_plan(json.dumps(PLAN) + "\n\nThis fixes the bug.").verify == ["tests"]


def test_last_valid_plan_wins_when_the_reply_has_several():
    first = {**PLAN, "summary": "an example"}
    second = {**PLAN, "summary": "the real plan"}
    text = f"Example: {json.dumps(first)}\nActual:\n```json\n{json.dumps(second)}\n```"
    assert parse_plan(text).summary == "the real plan"


def test_valid_plan_is_preferred_over_a_later_non_plan_object():
    text = f"{json.dumps(PLAN)}\nmetadata: {json.dumps({'confidence': 0.9})}"
    assert parse_plan(text).summary == PLAN["summary"]


def test_reasoning_block_with_braces_is_skipped():
    text = "<think>maybe {\"summary\": \"draft\"} ... no</think>\n" + json.dumps(PLAN)
    assert parse_plan(text).summary == PLAN["summary"]


def test_missing_field_reason_names_the_field():
    bad = {**PLAN, "edits": [{"path": "a.py", "search": "x"}]}
    assert reason_of(json.dumps(bad)) == "edits.0.replace: field required"


def test_an_edit_naming_neither_a_definition_nor_a_search_says_so():
    bad = {**PLAN, "edits": [{"path": "a.py", "replace": "x"}]}
    assert "give `symbol` (a definition shown whole) or `search`" in reason_of(json.dumps(bad))


def test_a_raw_newline_inside_a_string_is_read_as_the_newline_it_is():
    """What a small model writes without a grammar: `Invalid control character` in a strict parser."""
    raw = '{"summary": "fix", "edits": [{"path": "a.py", "symbol": "f", "replace": '
    raw += '"def f():\n    return 1"}]}'
    assert "\n" in raw  # a real newline inside the JSON string
    plan = parse_plan(raw)
    assert plan.edits[0].replace == "def f():\n    return 1"


def test_unknown_field_reason_names_it():
    assert "command: extra inputs are not permitted" in reason_of(json.dumps({**PLAN, "command": "rm"}))


def test_invalid_json_reason_carries_the_parser_error_and_position():
    reason = reason_of('{"summary": "x", "edits": [,]}')
    assert reason.startswith("invalid JSON:")
    assert "line 1" in reason


def test_cut_off_object_inside_prose_is_reported_as_incomplete():
    reason = reason_of('Here is the plan: {"summary": "x", "edits": [{"path": "a"')
    assert "no complete JSON object" in reason


def test_reply_without_json_is_rejected_with_a_short_excerpt():
    reply = "I cannot help with that. " * 400
    reason = reason_of(reply)
    assert reason.startswith("no JSON object in the reply")
    assert len(reason) <= MAX_REASON
    assert reply[:400] not in reason


def test_empty_reply_is_rejected():
    assert reason_of("   ") == "the reply is empty"


def test_non_object_json_is_rejected():
    assert "no JSON object" in reason_of("[1, 2, 3]")


def test_validation_reason_never_echoes_reply_values():
    huge = "S" * 5000
    reason = reason_of(json.dumps({**PLAN, "summary": huge, "verify": "tests"}))
    assert "SSSSSSSSSS" not in reason
    assert "summary" in reason and "verify" in reason
    assert len(reason) <= MAX_REASON


def test_many_errors_are_summarised_with_a_count():
    bad = {"summary": "x", "edits": [{"path": 1}, {"path": 2}, {"path": 3}]}
    reason = reason_of(json.dumps(bad))
    assert "more)" in reason
    assert len(reason) <= MAX_REASON


def test_think_tags_inside_the_plan_are_kept():
    plan = {**PLAN, "edits": [{"path": "a.py", "search": "<think>x</think>", "replace": ""}]}
    assert parse_plan(json.dumps(plan)).edits[0].search == "<think>x</think>"


def test_extract_json_returns_only_the_object_text():
    text = f"prefix ```json\n{json.dumps(PLAN)}\n``` suffix"
    assert json.loads(extract_json(text)) == PLAN


_plans = st.builds(
    Plan,
    summary=st.text(min_size=1, max_size=60),
    edits=st.lists(
        st.fixed_dictionaries(
            {
                "path": st.text(min_size=1, max_size=30),
                "search": st.text(max_size=60),
                "replace": st.text(max_size=60),
            }
        ),
        max_size=3,
    ),
    verify=st.lists(st.text(max_size=10), max_size=3),
    report=st.none() | st.text(max_size=60),
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(plan=_plans, wrap=st.sampled_from(["bare", "fenced", "prose"]))
def test_any_valid_plan_round_trips_through_every_wrapping(plan, wrap):
    text = plan.model_dump_json()
    if wrap == "fenced":
        text = f"```json\n{text}\n```"
    elif wrap == "prose":
        text = f"Sure {{ok}}. Plan:\n{text}\nThat's it }} bye."
    assert parse_plan(text) == plan
