"""LLMPlanner against the real scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from autod.config.settings import LLMConfig, LLMEndpoint
from autod.errors import LLMUnavailable
from autod.events import Event, EventKind
from autod.planner import PlanRequest, PlanResult
from autod.planner.llm import LLMPlanner

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # the shared helper lives in tests/, which is not a package
    sys.path.insert(0, str(TESTS))

from llmserver import ScriptedLLM, scripted_llm_fixture  # noqa: E402

pytestmark = pytest.mark.slow

llm = pytest.fixture(scripted_llm_fixture)

PLAN = {
    "summary": "guard the division",
    "edits": [{"path": "src/calc.py", "search": "return a / b", "replace": "return a / b if b else 0.0"}],
    "verify": ["tests"],
    "report": None,
}


def request() -> PlanRequest:
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f")
    messages = [{"role": "system", "content": "You write plans."}, {"role": "user", "content": "Fix it."}]
    return PlanRequest(mode="auto-debug", event=event, messages=messages)


def plan_with(base_url: str, key: str | None = None, sleep: Any = None, **cfg: Any) -> PlanResult:
    """One plan() against base_url, with fast retries (the backoff itself is covered by unit tests)."""

    async def go() -> PlanResult:
        kw: dict[str, Any] = {"retry_base_s": 0.01, "retry_max_s": 0.05}
        if sleep is not None:
            kw["sleep"] = sleep
        planner = LLMPlanner(LLMConfig(base_url=base_url, **cfg), key, **kw)
        try:
            return await planner.plan(request())
        finally:
            await planner.aclose()

    return asyncio.run(asyncio.wait_for(go(), timeout=60))  # hang guard only


def test_plan_from_the_server_with_schema_usage_and_key(llm: ScriptedLLM):
    llm.push_plan(PLAN)
    result = plan_with(llm.base_url, key="sk-loopback-1234", model="coder")
    assert result.plan.edits[0].replace == "return a / b if b else 0.0"
    assert result.endpoint == llm.base_url
    assert result.tokens.prompt > 0 and result.tokens.completion > 0
    body = llm.requests[0]
    assert body["model"] == "coder" and body["response_format"]["type"] == "json_schema"
    assert llm.headers[0]["authorization"] == "Bearer sk-loopback-1234"


@pytest.mark.parametrize("wrap", [{"fenced": True}, {"prose": True}, {"fenced": True, "prose": True}])
def test_fenced_and_prose_wrapped_plans_parse(llm: ScriptedLLM, wrap: dict[str, bool]):
    llm.push_plan(PLAN, **wrap)
    assert plan_with(llm.base_url).plan.summary == PLAN["summary"]
    assert len(llm.requests) == 1


def test_invalid_json_then_valid_plan_uses_the_repair_round(llm: ScriptedLLM):
    llm.push_text('{"summary": "x", "edits": [}')
    llm.push_plan(PLAN)
    assert plan_with(llm.base_url).plan.summary == PLAN["summary"]
    repair = llm.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"summary": "x", "edits": [}'}
    assert "Your reply was not a valid plan: invalid JSON" in repair[-1]["content"]


def test_two_server_errors_then_a_plan_succeeds_by_retrying(llm: ScriptedLLM):
    llm.push_status(500, '{"error": {"message": "boom"}}')
    llm.push_status(500)
    llm.push_plan(PLAN)
    assert plan_with(llm.base_url, max_retries=3).plan.summary == PLAN["summary"]
    assert len(llm.requests) == 3


def test_429_retry_after_is_waited_for(llm: ScriptedLLM):
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(seconds)

    llm.push_status(429, "slow down", {"Retry-After": "1"})
    llm.push_plan(PLAN)
    assert plan_with(llm.base_url, sleep=sleep).plan.summary == PLAN["summary"]
    assert slept == [1.0]
    assert len(llm.requests) == 2


def test_hang_past_the_deadline_is_unavailable(llm: ScriptedLLM):
    llm.push_hang(30)
    with pytest.raises(LLMUnavailable, match="deadline of 1s exceeded"):
        plan_with(llm.base_url, timeout_s=1)


def test_server_refusing_json_schema_is_asked_again_with_json_object(llm: ScriptedLLM):
    llm.refuse_response_format()
    llm.push_plan(PLAN)
    assert plan_with(llm.base_url).plan.summary == PLAN["summary"]
    assert [r["response_format"]["type"] for r in llm.requests] == ["json_schema", "json_object"]


def test_reply_cut_off_by_length_is_asked_again_with_a_nudge_at_the_same_cap(llm: ScriptedLLM):
    llm.push_plan({**PLAN, "summary": "truncated but parseable"}, finish_reason="length")
    llm.push_plan(PLAN)
    result = plan_with(llm.base_url, max_tokens=800)
    assert result.plan.summary == PLAN["summary"]
    assert [r["max_tokens"] for r in llm.requests] == [800, 800]
    assert "cut off by the length limit" in llm.requests[1]["messages"][-1]["content"]


def test_fallback_endpoint_answers_when_the_primary_keeps_failing(llm: ScriptedLLM):
    llm.set_default({"status": 500, "body": "down"})
    with ScriptedLLM() as backup:
        backup.push_plan(PLAN)
        fb = LLMEndpoint(base_url=backup.base_url, model="backup-model", api_key="sk-backup-5678")
        result = plan_with(llm.base_url, key="sk-primary-1234", max_retries=1, fallback=fb)
        assert result.endpoint == backup.base_url
        assert len(llm.requests) == 2
        assert backup.requests[0]["model"] == "backup-model"
        assert backup.headers[0]["authorization"] == "Bearer sk-backup-5678"


def test_ping_is_true_while_serving_and_false_once_stopped():
    server = ScriptedLLM().start()

    async def ping() -> bool:
        planner = LLMPlanner(LLMConfig(base_url=server.base_url), None)
        try:
            return await planner.ping()
        finally:
            await planner.aclose()

    try:
        assert asyncio.run(ping()) is True
    finally:
        server.stop()
    assert asyncio.run(ping()) is False


def test_server_runs_as_a_subprocess_from_a_script_file(tmp_path: Path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"status": 503}, {"text": "not json"}, {"plan": PLAN, "fenced": True}]))
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "llmserver.py"), "--script", str(script),
         "--port-file", str(port_file), "--log", str(log)],
    )
    try:
        give_up = time.monotonic() + 30  # hang guard
        while not port_file.exists():
            assert proc.poll() is None, "llmserver exited early"
            assert time.monotonic() < give_up, "llmserver wrote no port file"
            time.sleep(0.05)
        base_url = f"http://127.0.0.1:{int(port_file.read_text())}/v1"
        assert plan_with(base_url).plan.summary == PLAN["summary"]
        logged = [json.loads(line) for line in log.read_text().splitlines()]
        assert len(logged) == 3
        assert "Your reply was not a valid plan" in logged[2]["messages"][-1]["content"]
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
