"""Through `autod run`, a loopback LLM that continues the answer it is begun with, and the real bwrap:
with `llm.point_lines` below the suspect's body, its greedy draw asks which line first, then is written
from the named line, and the fix lands as a user would see it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_e2e_prefill import STATS, run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_linechoice import offered  # the reader that follows llama.cpp's grammar parser

from autod.planner import point

pytestmark = pytest.mark.slow

SLIP = "    return sum(values) / (len(values) + 1)"
ASKED = point.ASK.format(name="mean")  # leg one's question names the definition


def test_the_draw_names_its_line_then_is_written_from_it_and_the_fix_lands(tmp_path, scripted_llm,
                                                                          real_bwrap):
    leg_one = f"{ASKED}````python\n{SLIP}\n"  # the line; then the fix, answered from the named line on
    r, buggy = run(tmp_path, scripted_llm, "", first=(leg_one,), point_lines=1)
    assert scripted_llm.paths[:2] == ["/v1/completions", "/v1/completions"]
    one, two = (b["prompt"] for b in scripted_llm.requests[:2])
    assert one.endswith(f"<|im_start|>assistant\n{ASKED}````python\n")
    at = buggy.strip("\n").split("\n").index(SLIP)
    assert two.endswith("<|im_start|>assistant\n" + point.begun(buggy, at))
    assert f"{point.FOLLOW}<|im_end|>" in two  # the conversation went on from leg one's answer
    assert r["candidates"][0]["view"] == "focused:1" and r["candidates"][0]["outcome"] == "fixed"


def test_a_line_named_and_written_back_unchanged_is_not_offered_to_the_suspects_next_draw(
    tmp_path, scripted_llm, real_bwrap
):
    """The first draw names `if not values:` and writes it back unchanged (an echo, ended two lines on);
    the suspect's next draw (the pointed question) is held to its other lines, names the slip and
    fixes it."""
    guard = "    if not values:"
    leg_two_echo = f"````python\n{STATS.format(marker='')}````\n"  # continued from the named line, as it was
    legs = (f"{ASKED}````python\n{guard}\n", leg_two_echo, f"{ASKED}````python\n{SLIP}\n")
    r, _ = run(tmp_path, scripted_llm, "", first=legs, candidates={"focused": 2}, point_lines=1)
    grammars = [b.get("grammar") for b in scripted_llm.requests]
    one, _, three, _ = scripted_llm.requests[:4]
    assert offered(one["grammar"]).count(guard.strip()) == 1
    assert guard.strip() not in offered(three["grammar"]) and SLIP.strip() in offered(three["grammar"])
    assert grammars[1] is None and grammars[3] is None  # leg two is free
    assert [c["outcome"] for c in r["candidates"]][-1] == "fixed" and r["candidates"][0]["outcome"] != "fixed"


def test_the_last_line_named_and_written_back_to_the_block_s_end_is_not_offered_again(
    tmp_path, scripted_llm, real_bwrap
):
    """The named line is the definition's last, so the first draw's leg two is an echo only once its
    block closes (the watch's "closed", not "echo"); it is tried all the same, and the suspect's next draw
    (the pointed question) is held to its other lines. It names the guard and writes it back; the draw
    after it fixes the slip."""
    guard = "    if not values:"
    leg_two_echo = f"````python\n{STATS.format(marker='')}````\n"
    legs = (f"{ASKED}````python\n{SLIP}\n", leg_two_echo, f"{ASKED}````python\n{guard}\n", leg_two_echo)
    r, _ = run(tmp_path, scripted_llm, "", first=legs, candidates={"focused": 2}, point_lines=1)
    one, _, three, _ = scripted_llm.requests[:4]
    assert [c["ended"] for c in r["candidates"][:2]] == ["closed", "echo"]
    assert SLIP.strip() in offered(one["grammar"]) and SLIP.strip() not in offered(three["grammar"])
    assert [c["outcome"] for c in r["candidates"]][-1] == "fixed" and r["candidates"][0]["outcome"] != "fixed"


def test_a_short_suspect_s_pointed_question_after_an_echo_is_asked_in_two_legs(tmp_path, scripted_llm,
                                                                               real_bwrap):
    """At the default `llm.point_lines` the 3-line body is asked whole, and its greedy reply is an echo; its
    pointed question, which asked whole gave the same echo back, names its line first (held to the
    definition's lines) and is written from there: the fix lands."""
    echo = f"````python\n{STATS.format(marker='')}````\n"
    r, buggy = run(tmp_path, scripted_llm, "", first=(echo, f"{ASKED}````python\n{SLIP}\n"),
                   candidates={"focused": 2})
    bodies = scripted_llm.requests[:3]
    greedy, one, two = (b["prompt"] for b in bodies)
    assert greedy.endswith(buggy.split("    if not values")[0]) and "grammar" not in bodies[0]
    assert one.endswith(f"<|im_start|>assistant\n{ASKED}````python\n") and "grammar" in bodies[1]
    at = buggy.strip("\n").split("\n").index(SLIP)
    assert two.endswith("<|im_start|>assistant\n" + point.begun(buggy, at))
    assert [(c["view"], c["outcome"]) for c in r["candidates"]] == [("focused:1", "no_change"),
                                                                   ("pointed:1", "fixed")]


def test_a_definition_holding_the_llm_key_leaves_only_redacted(tmp_path, scripted_llm, real_bwrap):
    """The suspect's docstring holds the configured API key. The prompt is redacted, but a reply begun
    with the definition's head, leg two's start and leg one's grammar are its raw text: such a suspect is
    asked whole on the chat endpoint from the redacted prompt, and no request body holds the key."""
    key = "sk-live-7c1e94b2d05a8f36"
    r, _ = run(tmp_path, scripted_llm, f" Token: {key}.", point_lines=1, api_key=key)
    bodies = [json.dumps(b) for b in scripted_llm.requests]
    assert bodies and not [b for b in bodies if key in b or key[-12:] in b]
    assert "***" in bodies[0] and set(scripted_llm.paths) == {"/v1/chat/completions"}
    assert r["candidates"][0]["outcome"] == "fixed"
