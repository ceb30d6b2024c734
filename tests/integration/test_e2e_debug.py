"""End to end: `autod run` as a process, a real git repo, a scripted LLM on 127.0.0.1."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, run_cli, write_config

pytestmark = pytest.mark.slow


def start(tmp_path: Path, repo: Path, llm_url: str | None, **overrides: object) -> Autod:
    cfg = base_config(repo, **overrides)
    cfg["llm"]["base_url"] = llm_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    return Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()


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


@pytest.mark.parametrize(
    ("steps", "status", "reason_part"),
    [
        # the code reply form (the default): a block autod cannot place, twice (the repair round)
        ([{"text": "I changed it:\n```python\nprint('x')\n```"}, {"text": "```python\nx = (\n```"}],
         "rejected", "a code block with no header"),
        ([{"status": 500}] * 2, "failed", "500"),
        (
            [{"plan": {**FIX_PLAN, "edits": [{"path": "../outside.txt", "search": "", "replace": "x"}]}}],
            "rejected",
            "outside.txt",
        ),
        (
            [{"plan": {**FIX_PLAN, "edits": [{"path": "/etc/passwd", "search": "root", "replace": "x"}]}}],
            "rejected",
            "passwd",
        ),
        (
            [{"plan": {**FIX_PLAN, "edits": [{"path": ".git/config", "search": "[core]", "replace": "x"}]}}],
            "rejected",
            ".git",
        ),
        (
            [
                {
                    "plan": {
                        **FIX_PLAN,
                        "edits": [{"path": "src/calc.py", "search": "not in the file", "replace": "x"}],
                    }
                }
            ],
            "rejected",
            "not found",
        ),
    ],
    ids=["unplaceable-code", "http-500", "dotdot-escape", "absolute-path", "dot-git", "search-missing"],
)
def test_bad_llm_replies_write_nothing_and_the_daemon_serves_the_next_event(
    tmp_path, calc_repo, scripted_llm, steps, status, reason_part
):
    for step in steps:
        scripted_llm.push(step)
    before = {p: p.read_bytes() for p in calc_repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    git_config = (calc_repo / ".git" / "config").read_bytes()
    d = start(
        tmp_path,
        calc_repo,
        scripted_llm.base_url,
        modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}},
    )
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == status, r
        assert reason_part in (r["reason"] or ""), r["reason"]
        assert scripted_llm.pending == 0  # every scripted bad reply was consumed by that cycle
        after = {p: p.read_bytes() for p in before}
        assert after == before
        assert (calc_repo / ".git" / "config").read_bytes() == git_config
        assert not (calc_repo.parent / "outside.txt").exists()
        # still alive: a manual trigger gets the next (good) plan and fixes it
        scripted_llm.push_plan(FIX_PLAN)
        out = run_cli("trigger", "auto-debug", "--message", "try again", "-c", str(d.config))
        assert out.returncode == 0, out.stderr
        rs = d.wait_reflections(2)
        assert rs[1]["status"] == "fixed", rs[1]
        status_out = json.loads(run_cli("status", "--json", "-c", str(d.config)).stdout)
        assert status_out["running"] is True
    finally:
        assert d.stop() == 0


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


def test_edit_that_breaks_python_syntax_is_refused_unwritten(tmp_path, calc_repo, scripted_llm):
    broken = {
        **FIX_PLAN,
        "edits": [{"path": "src/calc.py", "search": "return a - b", "replace": "return a +"}],
    }
    scripted_llm.push_plan(broken)
    d = start(
        tmp_path,
        calc_repo,
        scripted_llm.base_url,
        modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}},
    )
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "rejected" and "syntax" in r["reason"], r
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
    finally:
        d.stop()


def test_bad_config_exits_78_naming_file_line_and_field(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"workspace: {tmp_path}\nllm:\n  api_key: sk-verysecretvalue123\n  timeout_s: soon\n")
    out = run_cli("run", "-c", str(cfg))
    assert out.returncode == 78
    assert f"{cfg}:4: llm.timeout_s" in out.stderr
    assert "Traceback" not in out.stderr and "sk-verysecretvalue123" not in out.stderr + out.stdout
    out = run_cli("config", "check", "-c", str(cfg))
    assert out.returncode == 78 and "llm.timeout_s" in out.stderr


def test_sighup_with_a_bad_config_keeps_the_old_one(tmp_path, calc_repo, scripted_llm):
    scripted_llm.push_plan(FIX_PLAN)
    d = start(tmp_path, calc_repo, scripted_llm.base_url)
    try:
        d.wait_reflections(1)
        good = d.config.read_text()
        d.config.write_text(good + "bogus_key: 1\n")
        d.signal(signal.SIGHUP)
        line = d.wait_for(
            lambda recs: [x for x in recs if x.get("event") == "config.reload_refused"], 30, "reload refused"
        )
        assert "bogus_key" in line[0]["error"]
        d.config.write_text(good.replace("min_interval_s: 0", "min_interval_s: 1"))
        d.signal(signal.SIGHUP)
        d.wait_for(
            lambda recs: [x for x in recs if x.get("event") == "config.reloaded"], 30, "config reloaded"
        )
        assert d.proc is not None and d.proc.poll() is None
    finally:
        assert d.stop() == 0
