"""End to end: `autod run` as a process, a real git repo, a scripted LLM on 127.0.0.1.

Bad replies and refused plans, one daemon serving them all: test_llm_faults.py. A refused reload, then
a good one: test_e2e_firstday.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, run_cli, start_autod

pytestmark = pytest.mark.slow


def start(tmp_path: Path, repo: Path, llm_url: str | None, **overrides: object) -> Autod:
    cfg = base_config(repo, **overrides)
    return start_autod(tmp_path, cfg, llm_url)


def test_failing_test_is_fixed_by_the_llm_plan_and_sigterm_exits_0(tmp_path, calc_repo, scripted_llm):
    scripted_llm.push_plan(FIX_PLAN)
    d = start(tmp_path, calc_repo, scripted_llm.base_url)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY.replace("a - b", "a + b")
        assert r["edits"] == [{"path": "src/calc.py", "added": 1, "removed": 1}]
        assert [c["name"] for c in r["checks"]] == ["tests"] and r["checks"][0]["exit_code"] == 0
        assert r["tokens"]["prompt"] > 0 and r["lesson"] and "worked" in r["lesson"]
        assert set(r["durations_ms"]) >= {"observe", "plan", "act", "reflect"}
        # the prompt carried the failure output and the source around the failing line
        prompt = json.dumps(scripted_llm.requests[0]["messages"])
        assert "assert -1 == 5" in prompt or "AssertionError" in prompt
        assert "return a - b" in prompt
        # every line of the cycle carries its context
        cycle_lines = [x for x in d.records() if x.get("cycle_id") == r["cycle_id"]]
        assert {x["phase"] for x in cycle_lines} == {"observe", "plan", "act", "reflect"}
        assert all(x["event_id"] and x["mode"] == "auto-debug" for x in cycle_lines)
    finally:
        code = d.stop()
    assert code == 0
    hist = run_cli("history", "--json", "-c", str(d.config))
    rows = json.loads(hist.stdout)
    assert rows[0]["status"] == "fixed"


def test_a_wrong_fix_fails_on_the_mirror_and_the_replan_sees_it(tmp_path, calc_repo, scripted_llm):
    """A wrong candidate is verified on the workspace's mirror: it never reaches the working tree."""
    wrong = {
        **FIX_PLAN,
        "summary": "multiply instead",
        "edits": [{"path": "src/calc.py", "search": "return a - b", "replace": "return a * b"}],
    }
    scripted_llm.push_plan(wrong)
    scripted_llm.push_plan(FIX_PLAN)
    d = start(tmp_path, calc_repo, scripted_llm.base_url)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed" and r["attempts"] == 2, r
        second_prompt = json.dumps(scripted_llm.requests[1]["messages"])
        assert "multiply instead" in second_prompt and "return a * b" in second_prompt
        assert [c["outcome"] for c in r["candidates"]] == ["rolled_back", "fixed"]
        written = [x for x in d.records() if x.get("event") in ("act.applied", "act.rolled_back")]
        assert [x["event"] for x in written] == ["act.applied"]  # only the winner, only once
    finally:
        assert d.stop() == 0
    assert "return a + b" in (calc_repo / "src" / "calc.py").read_text()


def test_bad_config_exits_78_naming_file_line_and_field(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"workspace: {tmp_path}\nllm:\n  api_key: sk-verysecretvalue123\n  timeout_s: soon\n")
    out = run_cli("run", "-c", str(cfg))
    assert out.returncode == 78
    assert f"{cfg}:4: llm.timeout_s" in out.stderr
    assert "Traceback" not in out.stderr and "sk-verysecretvalue123" not in out.stderr + out.stdout
    out = run_cli("config", "check", "-c", str(cfg))
    assert out.returncode == 78 and "llm.timeout_s" in out.stderr
