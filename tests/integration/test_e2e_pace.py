"""Through `autod run`, twice on one state dir, a loopback LLM that reads a prompt 50x faster than it
writes (autod.planner.pace, autod.runtime.windows.KeptPace): the first run measures the server's
reading/writing ratio on its streamed replies and keeps it; the restarted daemon's first plan is priced
at that ratio, before it has sent the server a single request, not at the order's constant."""

from __future__ import annotations

import pytest
from daemon import base_config, make_repo, start_autod
from llmserver import CHUNK_CHARS
from test_e2e_splice import STATS_TEST  # the same two tests of `mean`

from autod.candidates.order import READ_PER_GENERATED
from autod.planner.pace import KEPT_DRIFT

pytestmark = pytest.mark.slow

READ_S, CHUNK_S = 0.0002, 0.01  # a prompt token read; a reply's chunk (a token) written: a ratio of 0.02
STATS = "def mean(values, default=0.0):\n    if not values:\n        return default\n" + \
    "".join(f"    # step {i}: the values are summed, then divided by their count\n" for i in range(6)) + \
    "    return sum(values) / (len(values) + 1)\n"


def test_a_restarted_daemon_prices_its_first_plan_at_the_pace_the_last_run_measured(tmp_path, scripted_llm,
                                                                                      real_bwrap):
    repo = make_repo(tmp_path / "repo", {"src/__init__.py": "", "src/stats.py": STATS,
                                         "tests/test_stats.py": STATS_TEST})
    scripted_llm.behave(read_s_per_token=READ_S, chunk_s=CHUNK_S)
    for k in range(2, 8):  # changes that fix nothing, each its own: every draw is streamed and judged
        scripted_llm.push_text(f"```python\n{STATS.replace('+ 1)', f'+ {k})')}```\n")
    llm = {"reply_form": "code", "base_url": scripted_llm.base_url}
    cfg = base_config(repo, ranked=True, llm=llm, candidates={"n": 1, "seed": 40, "focused": 1},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    cfg["checks"]["tests"]["run"] = cfg["checks"]["tests"]["run"].replace(" tests", " tests/test_stats.py")

    first = start_autod(tmp_path, cfg)
    try:
        (r,) = first.wait_reflections(1)
        assert r["status"] != "fixed", r
    finally:
        assert first.stop() == 0
    records = first.records()
    (plan,) = [e for e in records if e.get("event") == "candidates.plan"]
    assert plan["read_per_generated"] == round(READ_PER_GENERATED, 4)  # nothing measured yet
    paces = [e for e in records if e.get("event") == "llm.pace" and e.get("readings", 0) >= 2]
    assert paces, "the first run measured no pace"
    measured = paces[-1]["read_ms_per_token"] / paces[-1]["write_ms_per_token"]
    per_char = (READ_S / 4) / (CHUNK_S / CHUNK_CHARS)  # a prompt token of 4 characters, a chunk of 7
    assert per_char / 2 < measured < per_char * 2, paces[-1]
    asked, logged = len(scripted_llm.requests), len(records)

    second = start_autod(tmp_path, cfg)  # the same state dir: a restart
    try:
        plans = second.wait_for(
            lambda recs: [e for e in recs if e.get("event") == "candidates.plan"][1:], 90, "the second plan")
        second.wait_reflections(2)
    finally:
        assert second.stop() == 0
    records = second.records()[logged:]  # one log file: the second run's lines follow the first's
    (recalled,) = [e for e in records if e.get("event") == "llm.pace_recalled"]
    # what was kept last: the pace as measured then, kept again whenever it moved past KEPT_DRIFT
    assert abs(recalled["read_per_generated"] - measured) <= KEPT_DRIFT * 2 * measured, (recalled, measured)
    assert plans[0]["read_per_generated"] == recalled["read_per_generated"] != round(READ_PER_GENERATED, 4)
    # priced before the restarted daemon asked the server anything: its first request came after the plan
    at = records.index(plans[0])
    assert not [e for e in records[:at] if e.get("event") == "llm.request"]
    assert [e for e in records[at:] if e.get("event") == "llm.request"], "the second run drew nothing"
    assert len(scripted_llm.requests) > asked
