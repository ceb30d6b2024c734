"""Through `autod run`, a loopback LLM that continues the answer it is begun with, and the real bwrap:
with `llm.point_lines` below the suspect's body, its greedy draw asks which line first, then is written
from the named line, and the fix lands as a user would see it."""

from __future__ import annotations

import pytest
from daemon import base_config, make_repo, start_autod
from test_e2e_prefill import STATS, STATS_TEST, reply

from autod.planner import point

pytestmark = pytest.mark.slow


def test_the_draw_names_its_line_then_is_written_from_it_and_the_fix_lands(tmp_path, scripted_llm,
                                                                          real_bwrap):
    buggy = STATS.format(marker="")
    slip = "    return sum(values) / (len(values) + 1)"
    fixed = buggy.replace(slip, "    return sum(values) / len(values)")
    at = buggy.strip("\n").split("\n").index(slip)
    repo = make_repo(tmp_path / "repo", {"src/__init__.py": "", "src/stats.py": buggy,
                                         "tests/test_stats.py": STATS_TEST})
    scripted_llm.push_text(f"{point.ASK}````python\n{slip}\n")  # leg one: the line
    scripted_llm.push_text(reply(fixed))  # leg two: answered from the named line on
    llm = {"reply_form": "code", "base_url": scripted_llm.base_url, "prefill": "chatml", "point_lines": 1}
    cfg = base_config(repo, ranked=True, llm=llm, candidates={"n": 1, "seed": 40, "focused": 1},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    cfg["checks"]["tests"]["run"] = cfg["checks"]["tests"]["run"].replace(" tests", " tests/test_stats.py")
    d = start_autod(tmp_path, cfg)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert (repo / "src" / "stats.py").read_text() == fixed
    finally:
        assert d.stop() == 0
    assert scripted_llm.paths[:2] == ["/v1/completions", "/v1/completions"]
    one, two = (b["prompt"] for b in scripted_llm.requests[:2])
    assert one.endswith(f"<|im_start|>assistant\n{point.ASK}````python\n")
    assert two.endswith("<|im_start|>assistant\n" + point.begun(buggy, at))
    assert f"{point.FOLLOW}<|im_end|>" in two  # the conversation went on from leg one's answer
    assert r["candidates"][0]["view"] == "focused:1" and r["candidates"][0]["outcome"] == "fixed"
