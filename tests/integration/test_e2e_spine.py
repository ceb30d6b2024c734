"""End to end: a human edit breaks a test, the watcher's change check catches it, the LLM fixes it,
autod's own write triggers nothing, and a recurring failure's prompt carries the earlier lesson."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, start_autod

pytestmark = pytest.mark.slow

WATCH = [{"type": "watch", "paths": ["src", "tests"], "settle_ms": 200}]


def start(tmp_path: Path, repo: Path, llm_url: str, **overrides: object) -> Autod:
    cfg = base_config(repo, sources=WATCH, **overrides)
    return start_autod(tmp_path, cfg, llm_url)


def check_runs(records: list[dict]) -> list[dict]:
    return [x for x in records if x.get("event") == "check.ran"]


def test_a_human_edit_that_breaks_a_test_is_fixed_and_autods_own_write_triggers_nothing(
    tmp_path, calc_repo, scripted_llm
):
    calc = calc_repo / "src" / "calc.py"
    calc.write_text(CALC_BUGGY.replace("a - b", "a + b"))  # green at start
    scripted_llm.push_plan(FIX_PLAN)
    d = start(tmp_path, calc_repo, scripted_llm.base_url)
    try:
        assert d.wait_ready()["checks"] == {"tests": "passed"}  # the watcher is armed too
        calc.write_text(CALC_BUGGY)  # a human breaks it
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert "return a + b" in calc.read_text()
        runs = check_runs(d.records())
        assert [x["exit_code"] for x in runs] == [0, 1]
        # autod's own fix must not trigger another check: the watcher saw it, settled and dropped it
        d.wait_for(lambda recs: [x for x in recs if x.get("event") == "watch.batch_dropped"
                                 and "src/calc.py" in x.get("paths", [])], 30, "the fix's write dropped")
        assert len(check_runs(d.records())) == 2
        assert len(d.reflections()) == 1
        assert len(scripted_llm.requests) == 1
    finally:
        assert d.stop() == 0


def test_a_recurring_failure_prompt_contains_the_earlier_lesson(tmp_path, calc_repo, scripted_llm):
    wrong = {
        **FIX_PLAN,
        "summary": "swap the operands of the subtraction",
        "edits": [{"path": "src/calc.py", "search": "return a - b", "replace": "return b - a"}],
    }
    scripted_llm.push_plan(wrong)
    scripted_llm.push_plan(FIX_PLAN)
    # the failure waits for its retry after the rolled-back cycle; the human's save merges into it
    # (a second failure of the same fingerprint): a short backoff, so the test does not wait for it
    d = start(tmp_path, calc_repo, scripted_llm.base_url, modes={"auto-debug": {"max_attempts_per_cycle": 1}},
              limits={"min_interval_s": 0, "retry_base_s": 1, "retry_max_s": 2})
    try:
        (r1,) = d.wait_reflections(1)
        assert r1["status"] == "rolled_back" and "did NOT work" in r1["lesson"]
        d.wait_ready()  # the watcher is armed (recall waits for the lesson's write by itself)
        test_file = calc_repo / "tests" / "test_calc.py"
        test_file.write_text(test_file.read_text() + "\n# touched by a human\n")
        r2 = d.wait_reflections(2)[1]
        assert r2["fingerprint"] == r1["fingerprint"]
        assert r2["status"] == "fixed", r2
        assert r2["memory_used"], "the second cycle recalled nothing"
        assert len(scripted_llm.requests) == 2  # the second cycle's first request is the one read below
        prompt = json.dumps(scripted_llm.requests[1]["messages"])
        memory_section = prompt.split("What autod remembers")[1].split("Earlier attempts")[0]
        assert "swap the operands" in memory_section and "did NOT work" in memory_section
    finally:
        assert d.stop() == 0
