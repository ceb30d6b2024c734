"""LLMPlanner against loopback servers that behave like the real ones autod meets.

llama-cpp-python (500 to json_schema, a single slot that keeps generating after the client gave up),
servers that stream SSE although asked not to, OpenAI reasoning models (400 to max_tokens), and
a context window the prompt does not fit. One test drives `autod run` against all quirks at once.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from autod.config.settings import LLMConfig
from autod.errors import ContextTooLong
from autod.events import Event, EventKind
from autod.plan import plan_schema
from autod.planner import PlanRequest
from autod.planner.llm import LLMPlanner

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, fixed_through, write_config  # noqa: E402
from llmserver import ScriptedLLM, scripted_llm_fixture  # noqa: E402

pytestmark = pytest.mark.slow

llm = pytest.fixture(scripted_llm_fixture)

PLAN = {"summary": "guard the division", "edits": [], "verify": ["tests"], "report": None}


def request(prompt: str = "Fix it.") -> PlanRequest:
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f")
    messages = [{"role": "system", "content": "You write plans."}, {"role": "user", "content": prompt}]
    return PlanRequest(mode="auto-debug", event=event, messages=messages)


def plans(base_url: str, n: int = 1, prompt: str = "Fix it.", **cfg: Any) -> list[Any]:
    """n plan() calls on one planner; each outcome is a PlanResult or the exception raised."""

    async def go() -> list[Any]:
        planner = LLMPlanner(LLMConfig(base_url=base_url, **cfg), None, retry_base_s=0.01, retry_max_s=0.05)
        out: list[Any] = []
        try:
            for _ in range(n):
                try:
                    out.append(await planner.plan(request(prompt)))
                except Exception as exc:
                    out.append(exc)
        finally:
            await planner.aclose()
        return out

    return asyncio.run(asyncio.wait_for(go(), timeout=120))  # hang guard only


def test_llama_cpp_python_500_to_json_schema_moves_on_at_once_and_is_remembered(llm: ScriptedLLM):
    llm.refuse_response_format("500")
    llm.push_plan(PLAN)
    llm.push_plan(PLAN)
    outcomes = plans(llm.base_url, 2, max_retries=3)
    assert [o.plan.summary for o in outcomes] == [PLAN["summary"]] * 2
    formats = [r.get("response_format") for r in llm.requests]
    # one refused request, no retries of it, then JSON mode carrying the schema (a grammar there)
    assert formats == [formats[0], {"type": "json_object", "schema": plan_schema()}, formats[1]]
    assert formats[0]["type"] == "json_schema"


def test_sse_only_server_reply_is_assembled_with_its_usage(llm: ScriptedLLM):
    llm.behave(sse=True)
    llm.push_plan(PLAN)
    [result] = plans(llm.base_url, stream=False)
    assert result.plan.summary == PLAN["summary"]
    assert result.tokens.prompt > 0 and result.tokens.completion > 0
    assert llm.requests[0]["stream"] is False


def test_server_refusing_max_tokens_gets_max_completion_tokens_once_and_for_good(llm: ScriptedLLM):
    llm.behave(token_param="max_completion_tokens")
    llm.push_plan(PLAN)
    llm.push_plan(PLAN)
    outcomes = plans(llm.base_url, 2, max_tokens=700)
    assert [o.plan.summary for o in outcomes] == [PLAN["summary"]] * 2
    sent = [("max_tokens" in r, r.get("max_completion_tokens")) for r in llm.requests]
    assert sent == [(True, None), (False, 700), (False, 700)]
    # the 400 was about the parameter: the strict response format is still the one used
    assert all(r["response_format"]["type"] == "json_schema" for r in llm.requests)


def test_prompt_over_the_context_window_is_context_too_long_not_a_format_refusal(llm: ScriptedLLM):
    llm.behave(context_limit=1000)
    [outcome] = plans(llm.base_url, prompt="x" * 8000)  # ~2000 tokens
    assert isinstance(outcome, ContextTooLong)
    assert "context" in outcome.reason and outcome.limit == 1000
    assert len(llm.requests) == 1  # no format negotiated away, no retry
    assert 0.2 <= outcome.fit() < 0.5


@pytest.mark.parametrize("body", ["endless", "trickle"])
def test_a_props_answer_that_never_ends_is_read_no_further_than_its_cap(llm: ScriptedLLM, body: str):
    """GET /props (llama.cpp states its window there) is a probe of an untrusted server: a body that
    never ends is dropped at its cap, one that comes a byte at a time at the probe's deadline, and the
    window is then the configured one (none here)."""
    llm.behave(props_n_ctx=body)
    planner = LLMPlanner(LLMConfig(base_url=llm.base_url, model="m", request_timeout_s=2), None)

    async def ask() -> int | None:
        try:
            return await asyncio.wait_for(planner.context_window(), 60)  # the old code read forever
        finally:
            await planner.aclose()

    assert asyncio.run(ask()) is None
    assert llm.props_asked >= 1


def test_prompt_that_fits_without_the_reply_cap_is_asked_again_with_a_smaller_cap(llm: ScriptedLLM):
    llm.behave(context_limit=2000)
    llm.push_plan(PLAN)
    [result] = plans(llm.base_url, prompt="x" * 4000, max_tokens=1500)  # ~1000 prompt tokens
    assert result.plan.summary == PLAN["summary"]
    caps = [r["max_tokens"] for r in llm.requests]
    assert caps[0] == 1500 and 256 <= caps[1] <= 1000


def test_busy_single_slot_server_is_not_sent_a_retry_behind_the_abandoned_request(llm: ScriptedLLM):
    """A reply asked whole (llm.stream off): the server generates it to the end after autod gave up."""
    llm.behave(single_slot=True)
    llm.push({"plan": PLAN, "generate_s": 3})  # longer than the client waits: given up, still running
    llm.push_plan(PLAN)
    [result] = plans(llm.base_url, request_timeout_s=1, timeout_s=60, max_retries=2, stream=False)
    assert llm.piled == 0  # the retry waited until /models said the slot was free
    assert result.plan.summary == PLAN["summary"]
    assert len(llm.requests) == 2


def test_a_reply_given_up_at_the_deadline_ends_on_the_server_and_the_next_is_not_held(llm: ScriptedLLM):
    """The plan's deadline passes mid-reply. Streamed, the single-slot server stops generating when
    autod closes the stream, so the next plan is answered at once, within its own deadline. Asked
    whole, the server would hold its one slot for the rest of the reply's 60 s."""
    llm.behave(single_slot=True)
    long = {**PLAN, "summary": "guard the division " * 100}  # ~300 chunks, one each 0.2 s
    llm.push({"plan": long, "generate_s": 60})
    llm.push_plan(PLAN)
    first, second = plans(llm.base_url, n=2, timeout_s=4, max_retries=0)
    assert not hasattr(first, "plan")  # given up at the deadline
    assert hasattr(second, "plan"), second
    gave_up = llm.streams[0]
    assert gave_up["left"] and gave_up["chunks"] < gave_up["of"]
    assert llm.piled == 0


def test_autod_run_fixes_a_bug_through_a_server_with_every_quirk(tmp_path, calc_repo, scripted_llm):
    """llama-cpp-python's 500 to json_schema, SSE only, and a 400 to max_tokens, all on one server
    (the JSON reply form, whose response_format is negotiated)."""
    scripted_llm.behave(refuse_response_format="500", sse=True, token_param="max_completion_tokens")
    scripted_llm.push_plan(FIX_PLAN)
    daemon, record = fixed_through(tmp_path, calc_repo,
                                   {"base_url": scripted_llm.base_url, "model": "qwen", "reply_form": "json",
                                    "stream": False})
    assert record["tokens"]["prompt"] > 0 and record["tokens"]["completion"] > 0
    bodies = scripted_llm.requests
    assert all(b["stream"] is False for b in bodies)
    # 400 to max_tokens (not a format refusal) -> 500 to json_schema (no retry) -> JSON mode + schema
    assert [("max_tokens" in b, b["response_format"]["type"]) for b in bodies] == [
        (True, "json_schema"),
        (False, "json_schema"),
        (False, "json_object"),
    ]
    events = {r.get("event") for r in daemon.records()}
    assert "llm.token_param_switched" in events and "llm.response_format_refused" in events


def test_autod_run_fixes_a_bug_in_the_code_form_through_a_reasoning_models_refusals(
    tmp_path, calc_repo, scripted_llm
):
    """OpenAI's reasoning models refuse `max_tokens` and `stop` with a 400 each: the code form (the
    default) asks again without them, at once, and the fix still lands; neither is sent again."""
    scripted_llm.behave(refuse_stop=True, token_param="max_completion_tokens")
    scripted_llm.push_text(
        "add subtracts.\n### src/calc.py · add\n```python\ndef add(a, b):\n    return a + b\n```\n"
    )
    daemon, _ = fixed_through(tmp_path, calc_repo, {"base_url": scripted_llm.base_url, "model": "o-mini"})
    sent = [("max_tokens" in b, "stop" in b, "response_format" in b) for b in scripted_llm.requests]
    assert sent[:3] == [(True, True, False), (False, True, False), (False, False, False)]
    assert all(not m and not st for m, st, _ in sent[3:])  # learnt once, for the daemon's lifetime
    events = [r.get("event") for r in daemon.records()]
    assert "llm.stop_refused" in events and "llm.token_param_switched" in events


def test_a_window_learnt_by_one_autod_run_is_recalled_by_the_next_over_the_same_state(
    tmp_path, calc_repo, scripted_llm
):
    """A server that states no context window (llama-cpp-python): the first run learns it from the
    server's context error; a restart over the same state dir recalls it and fits its first request.
    The server's tokens hold 2 characters (code in a small model's tokenizer is dense): without the
    ratio kept beside the window, the restart would size its first request by autod's estimate, and
    overflow the window it just recalled."""
    # the prompt fits, the prompt and the reply cap do not
    scripted_llm.behave(context_limit=3000, chars_per_token=2)
    llm = {"base_url": scripted_llm.base_url, "model": "qwen", "reply_form": "code"}
    fix = "add subtracts.\n### src/calc.py · add\n```python\ndef add(a, b):\n    return a + b\n```\n"
    events: list[list[str]] = []
    seen = 0  # both runs log to the same file: each run's lines are those after the last run's
    for run in (1, 2):
        # another bug on the restart: a failure already handled would not start a cycle again, and one
        # close to the first would be replayed from memory with no request at all
        bug = "a - b" if run == 1 else "max(a, b) * min(a, b) + 1"
        (calc_repo / "src" / "calc.py").write_text(CALC_BUGGY.replace("a - b", bug))
        scripted_llm.push_text(fix)
        cfg = base_config(calc_repo, ranked=True, llm=llm, state_dir=str(tmp_path / "state"))
        log = tmp_path / "state" / "logs" / "autod.jsonl"
        daemon = Autod(write_config(tmp_path / "autod.yaml", cfg), log_file=log).start()
        try:
            [record] = daemon.wait_reflections(run, timeout=120)[run - 1:]
            assert record["status"] == "fixed", record
        finally:
            assert daemon.stop() == 0
        lines = daemon.records()
        events.append([str(x.get("event")) for x in lines[seen:] if str(x.get("event")).startswith("llm.")])
        seen = len(lines)
    assert "llm.context_size_learnt" in events[0] and "llm.context_size_remembered" not in events[0]
    assert "llm.context_size_remembered" in events[1] and "llm.context_size_learnt" not in events[1]
    # run 1: refused for the context, asked again with a lower cap; run 2: the cap fitted before sending
    assert len(scripted_llm.requests) == 3 and scripted_llm.requests[2]["max_tokens"] < 1500
