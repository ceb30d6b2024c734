"""Through `autod run`, a loopback LLM that continues the answer it is begun with, and the real bwrap:
with `llm.point_lines` below the suspect's body, its greedy draw asks which line first, then is written
from the named line, and the fix lands as a user would see it."""

from __future__ import annotations

import pytest
from test_e2e_prefill import run

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
