"""A suspect whose greedy reply gave its definition back unchanged is asked again another way, through
`autod run` and a loopback LLM: the failing assertion beside it, not one more sample of the same prompt."""

from __future__ import annotations

import pytest
from daemon import CALC_BUGGY, base_config, start_autod

pytestmark = pytest.mark.slow


def reply(body: str) -> str:
    return f"Here it is.\n\n### src/calc.py · add\n```python\ndef add(a, b):\n    return {body}\n```\n"


def test_an_echoed_suspect_is_asked_with_the_failing_assertion_and_then_fixed(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    scripted_llm.push_text(reply("a - b"))  # the code as it is
    scripted_llm.push_text(reply("a + b"))
    cfg = base_config(calc_repo, ranked=True, candidates={"n": 1, "focused": 2},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    d = start_autod(tmp_path, cfg, scripted_llm.base_url)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert [(c["outcome"], c["view"]) for c in r["candidates"]] == [
            ("no_change", "focused:1"), ("fixed", "pointed:1")]  # the echo: a quote
        first, second = (q["messages"][-1]["content"] for q in scripted_llm.requests[:2])
        assert "Returned as it is, `add` fails the check the same way" not in first
        tail = second.split("Returned as it is, `add` fails the check the same way", 1)[1]
        assert "assert add(2, 3) == 5" in tail and "assert -1 == 5" in tail
        assert scripted_llm.requests[1].get("temperature") == 0.0
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY.replace("a - b", "a + b")
        draws = [x for x in d.records() if x.get("event") == "candidates.judged"]
        assert [(x["view"], x["tokens"] > 0, "model_s" in x) for x in draws] == [
            ("focused:1", True, True), ("pointed:1", True, True)]
    finally:
        assert d.stop() == 0
