"""What real servers answer, over httpx.MockTransport: refusals, SSE, token parameters, context, busy.

The bodies are the ones real servers send (llama-cpp-python 0.3, OpenAI, vLLM, llama.cpp's server).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs
from test_llm_client import PLAN, Server, completion, fails, make, plan_reply, request, run, run_many

from autod.config.settings import LLMConfig
from autod.errors import ContextTooLong, LLMUnavailable, PlanInvalid
from autod.plan import plan_schema
from autod.planner import wire
from autod.planner.llm import LLMPlanner

LLAMA_CPP_PYTHON_500 = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
OPENAI_MAX_TOKENS_400 = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}
OPENAI_CONTEXT_400 = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, you requested 9540 tokens "
        "(8040 in the messages, 1500 in the completion). Please reduce the length of the messages or "
        "completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
VLLM_CONTEXT_400 = {
    "object": "error",
    "message": "'max_tokens' or 'max_completion_tokens' is too large: 1500. This model's maximum context "
    "length is 4096 tokens and your request has 3900 input tokens (1500 > 4096 - 3900).",
    "type": "BadRequestError",
    "code": 400,
}
LLAMA_CPP_SERVER_CONTEXT_400 = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9000,
        "n_ctx": 8192,
    }
}


def resp(status: int, doc: dict[str, Any]) -> httpx.Response:
    return httpx.Response(status, json=doc)


def sse(
    content: str, *, usage: bool = True, ctype: str = "text/event-stream", finish: str = "stop",
    completion: int = 54,
) -> httpx.Response:
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    chunks += [{"choices": [{"index": 0, "delta": {"content": content[i : i + 5]}, "finish_reason": None}]}
               for i in range(0, len(content), 5)]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage:
        chunks.append({"choices": [], "usage": {"prompt_tokens": 321, "completion_tokens": completion}})
    text = ": keep-alive\n\n" + "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, content=text.encode(), headers={"content-type": ctype})


# -- the request -------------------------------------------------------------------------


def test_a_one_choice_request_is_streamed_unless_the_operator_says_not():
    """Streamed, so a reply autod gives up on ends on the server too (llm.stream)."""
    server = Server(primary=[plan_reply(), plan_reply()])
    run(make(server)[0])
    run(make(server, stream=False)[0])
    assert [b["stream"] for b in server.bodies()] == [True, False]


@pytest.mark.parametrize(("mode", "cap"), [("auto-debug", 1500), ("auto-doc", 2000), ("auto-plan", 2500)])
def test_reply_cap_is_the_modes_own_unless_the_operator_sets_one(mode, cap):
    server = Server(primary=[plan_reply()])
    req = request()
    req.mode = mode
    run(make(server)[0], req)
    run(make(server, max_tokens=900)[0], req)
    run(make(server, max_tokens_by_mode={mode: 700})[0], req)
    assert [b["max_tokens"] for b in server.bodies()] == [cap, 900, 700]


# -- response formats ---------------------------------------------------------------------


def test_llama_cpp_python_500_to_json_schema_is_a_refusal_with_no_retry_spent():
    server = Server(primary=[resp(500, LLAMA_CPP_PYTHON_500), plan_reply(), plan_reply()])
    planner, sleeps = make(server, max_retries=3)
    assert all(r.plan.summary == PLAN["summary"] for r in run_many(planner, 2))
    formats = [b["response_format"] for b in server.bodies()]
    assert formats[1:] == [{"type": "json_object", "schema": plan_schema()}] * 2  # remembered
    assert sleeps == []


def test_a_refused_json_object_schema_falls_back_to_plain_json_object():
    refusal = resp(400, {"error": {"message": "response_format.schema: Extra inputs are not permitted"}})
    unsupported = resp(400, {"error": {"message": "json_schema unsupported"}})
    server = Server(primary=[unsupported, refusal, plan_reply()])
    run(make(server)[0])
    assert [b["response_format"] for b in server.bodies()][1:] == [
        {"type": "json_object", "schema": plan_schema()},
        {"type": "json_object"},
    ]


def test_a_500_naming_a_grammar_failure_is_a_refusal_of_that_format():
    server = Server(primary=[plan_reply()])
    grammar = resp(500, {"error": {"message": "failed to parse grammar", "type": "internal_server_error"}})
    server.scripts["primary"] = [grammar, plan_reply()]
    planner, sleeps = make(server, response_format="json_object")
    run(planner)
    assert [b["response_format"] for b in server.bodies()] == [
        {"type": "json_object", "schema": plan_schema()},
        {"type": "json_object"},
    ]
    assert sleeps == []


def test_a_500_that_names_no_format_is_retried_not_negotiated():
    server = Server(primary=[resp(500, {"error": {"message": "CUDA out of memory"}}), plan_reply()])
    planner, sleeps = make(server)
    run(planner)
    assert [b["response_format"]["type"] for b in server.bodies()] == ["json_schema", "json_schema"]
    assert len(sleeps) == 1


# -- SSE ---------------------------------------------------------------------------------------


def test_sse_reply_is_assembled_from_deltas_with_its_usage():
    server = Server(primary=[sse(json.dumps(PLAN))])
    result = run(make(server)[0])
    assert result.plan.summary == PLAN["summary"]
    assert (result.tokens.prompt, result.tokens.completion) == (321, 54)


def test_a_stream_asks_for_its_token_counts_and_a_server_that_refuses_that_is_asked_again_without():
    refusal = httpx.Response(400, json={"error": {
        "message": "Unsupported parameter: 'stream_options' is not supported with this model.",
        "type": "invalid_request_error", "param": "stream_options"}})
    server = Server(primary=[sse(json.dumps(PLAN)), refusal, sse(json.dumps(PLAN)), sse(json.dumps(PLAN))])
    planner, sleeps = make(server)
    first, *rest = run_many(planner, 3)
    assert (first.tokens.prompt, first.tokens.completion) == (321, 54)  # the server's own counts
    assert all(r.plan.summary == PLAN["summary"] for r in rest)
    options = [b.get("stream_options") for b in server.bodies()]
    assert options == [{"include_usage": True}, {"include_usage": True}, None, None]  # learnt once
    assert sleeps == []  # a refusal is not a retry


def test_sse_body_labelled_as_json_is_still_read_and_missing_usage_is_estimated():
    content = json.dumps(PLAN)
    server = Server(primary=[sse(content, usage=False, ctype="application/json")] * 2)
    streamed = run(make(server)[0])
    unstreamed = run(make(server, stream=False)[0])
    assert streamed.plan.summary == unstreamed.plan.summary == PLAN["summary"]
    assert streamed.tokens.completion == -(-len(content) // 5)  # a content chunk a token (5 chars each)
    assert unstreamed.tokens.completion == len(content) // 4  # asked whole: by the text's length


def test_a_stream_without_usage_cut_well_before_the_cap_still_teaches_the_window():
    """llama-cpp-python's streams carry no usage: the reply is counted by its chunks and the prompt
    taken at 4.5 characters a token, so the window learnt is no larger than the server's."""
    prompt = "x" * 9000  # 2,000 tokens at 4.5 characters each (~3,000 at code's 3)
    server = Server(primary=[sse("y" * 200 * 5, usage=False, finish="length")])  # 200 chunks
    planner, _ = make(server)
    req = request()
    req.messages = [{"role": "user", "content": prompt}]
    with pytest.raises(ContextTooLong) as caught:
        run(planner, req)
    chars = sum(len(m["content"]) for m in req.messages)
    assert caught.value.limit == int(chars / 4.5) + 200 and caught.value.prompt_tokens == int(chars / 4.5)
    assert server.bodies()[0]["stream"] is True


def test_sse_reply_cut_off_by_length_is_never_parsed():
    # cut at autod's cap (llm.max_tokens_by_mode: 1500 for auto-debug), not by the server's window
    server = Server(primary=[sse(json.dumps(PLAN), finish="length", completion=1500), sse(json.dumps(PLAN))])
    run(make(server)[0])
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'data: {"error": {"message": "model crashed"}}\n\ndata: [DONE]\n\n', "streamed an error"),
        (b"data: {not json\n\n", "not JSON"),
        (b"data: [DONE]\n\n", "no chunks"),
    ],
)
def test_broken_sse_is_the_servers_fault(body, words):
    stream = httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    server = Server(primary=[stream])
    exc = fails(make(server)[0], LLMUnavailable)
    assert words in exc.reason


# -- max_tokens / max_completion_tokens ---------------------------------------------------------


def test_openai_400_to_max_tokens_switches_to_max_completion_tokens_and_is_not_a_format_refusal():
    server = Server(primary=[resp(400, OPENAI_MAX_TOKENS_400), plan_reply(), plan_reply()])
    planner, sleeps = make(server, max_tokens=800)
    with capture_logs() as logs:
        assert all(r.plan.summary == PLAN["summary"] for r in run_many(planner, 2))
    bodies = server.bodies()
    assert [(b.get("max_tokens"), b.get("max_completion_tokens")) for b in bodies] == [
        (800, None), (None, 800), (None, 800)
    ]
    assert {b["response_format"]["type"] for b in bodies} == {"json_schema"}
    events = [e["event"] for e in logs]
    assert "llm.token_param_switched" in events and "llm.response_format_refused" not in events
    assert sleeps == []


def test_token_param_is_switched_once_then_the_400_is_reported():
    server = Server(primary=[resp(400, OPENAI_MAX_TOKENS_400)])
    exc = fails(make(server)[0], LLMUnavailable)
    assert "HTTP 400" in exc.reason and "max_tokens" in exc.reason
    assert len(server.requests) == 2


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_a_configured_token_param_is_sent_and_never_switched(param):
    server = Server(primary=[resp(400, OPENAI_MAX_TOKENS_400)])
    fails(make(server, token_param=param, max_tokens=600)[0], LLMUnavailable)
    assert len(server.requests) == 1
    assert server.bodies()[0][param] == 600


# -- context length ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "doc", "limit", "prompt"),
    [
        (400, OPENAI_CONTEXT_400, 8192, 8040),
        (400, VLLM_CONTEXT_400, 4096, 3900),
        (400, LLAMA_CPP_SERVER_CONTEXT_400, 8192, 9000),
        (500, {"error": {"message": "Requested tokens (9000) exceed context window of 8192"}}, 8192, 9000),
        (400, {"error": {"message": "prompt is too long: 250000 tokens > 200000 maximum"}}, None, 250000),
    ],
)
def test_context_overflow_is_its_own_error_with_the_servers_numbers(status, doc, limit, prompt):
    server = Server(primary=[resp(status, doc)])
    planner, sleeps = make(server, max_retries=3)
    with capture_logs() as logs:
        exc = fails(planner, ContextTooLong)
    assert (exc.limit, exc.prompt_tokens) == (limit, prompt)
    assert "context" in exc.reason and "llm.max_tokens" in exc.reason
    # not a format refusal, not a token-parameter refusal, not an outage to retry
    assert len(server.requests) == 1 and sleeps == []
    assert not {"llm.response_format_refused", "llm.token_param_switched"} & {e["event"] for e in logs}


def test_context_overflow_does_not_drop_the_response_format_for_later_plans():
    server = Server(primary=[resp(400, OPENAI_CONTEXT_400), plan_reply()])
    planner, _ = make(server)
    outcomes = run_many(planner, 2)
    assert isinstance(outcomes[0], ContextTooLong) and outcomes[1].plan.summary == PLAN["summary"]
    assert [b["response_format"]["type"] for b in server.bodies()] == ["json_schema", "json_schema"]


def test_prompt_that_leaves_room_gets_a_smaller_reply_cap_once():
    fits = json.loads(json.dumps(OPENAI_CONTEXT_400))
    message = fits["error"]["message"]
    fits["error"]["message"] = message.replace("8040 in the messages", "7000 in the messages")
    server = Server(primary=[resp(400, fits), plan_reply()])
    run(make(server, max_tokens=1500)[0])
    assert [b["max_tokens"] for b in server.bodies()] == [1500, 8192 - 7000 - 32]


def test_fit_is_the_share_of_the_prompt_that_fits_beside_the_reply():
    assert ContextTooLong("x").fit() == 0.5
    exc = ContextTooLong("x", limit=8192, prompt_tokens=10000, reply_tokens=1500)
    assert exc.fit() == pytest.approx(0.9 * (8192 - 1500 - 64) / 10000)
    assert ContextTooLong("x", limit=1000, prompt_tokens=100000, reply_tokens=900).fit() == 0.2


# -- a busy single-slot server --------------------------------------------------------------------


class SingleSlot:
    """One request at a time, like llama-cpp-python: a completion the client gave up on still runs;
    GET /models waits for the slot. Records which completions arrived while it was busy."""

    def __init__(self, generate_s: list[float]) -> None:
        self.generate_s = list(generate_s)
        self.slot = asyncio.Lock()
        self.log: list[str] = []
        self.piled = 0  # completions that arrived while another was still generating
        self.busy = 0
        self.running: set[asyncio.Future[httpx.Response]] = set()  # kept alive past a cancel

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.log.append("probe")
            try:
                return await asyncio.wait_for(self._models(), request.extensions["timeout"]["read"])
            except TimeoutError:
                raise httpx.ReadTimeout("timed out", request=request) from None
        self.log.append("post")
        if self.busy:
            self.piled += 1
        self.busy += 1
        seconds = self.generate_s.pop(0) if self.generate_s else 0.0
        # The generation is shielded: neither the client's timeout nor a cancel stops it. A mock
        # transport has no timeouts of its own, so the client's read timeout is played here.
        generation = asyncio.ensure_future(self._generate(seconds))
        self.running.add(generation)
        try:
            return await asyncio.wait_for(asyncio.shield(generation), request.extensions["timeout"]["read"])
        except TimeoutError:
            raise httpx.ReadTimeout("timed out", request=request) from None

    async def _models(self) -> httpx.Response:
        async with self.slot:
            return httpx.Response(200, json={"data": []})

    async def _generate(self, seconds: float) -> httpx.Response:
        try:
            async with self.slot:
                await asyncio.sleep(seconds)
                return plan_reply()
        finally:
            self.busy -= 1


@pytest.mark.slow
def test_after_a_timeout_the_retry_waits_for_the_server_to_finish_the_abandoned_request():
    server = SingleSlot([0.6])

    async def go() -> Any:
        cfg = LLMConfig(base_url="http://primary.test/v1", request_timeout_s=0.2, timeout_s=30)
        planner = LLMPlanner(cfg, None, transport=httpx.MockTransport(server), retry_base_s=0.01,
                             retry_max_s=0.02)
        try:
            return await planner.plan(request())
        finally:
            await planner.aclose()

    result = asyncio.run(asyncio.wait_for(go(), 60))
    assert result.plan.summary == PLAN["summary"]
    assert server.piled == 0
    assert server.log == ["post", "probe", "post"]


@pytest.mark.slow
def test_the_next_plan_after_one_cancelled_mid_request_waits_for_the_server_too():
    server = SingleSlot([0.6])

    async def go() -> Any:
        planner = LLMPlanner(LLMConfig(base_url="http://primary.test/v1"), None,
                             transport=httpx.MockTransport(server))
        try:
            with pytest.raises(TimeoutError):  # a stop, or the cycle's own deadline
                await asyncio.wait_for(planner.plan(request()), 0.2)
            return await planner.plan(request())
        finally:
            await planner.aclose()

    result = asyncio.run(asyncio.wait_for(go(), 60))
    assert result.plan.summary == PLAN["summary"]
    assert server.piled == 0 and server.log == ["post", "probe", "post"]


@pytest.mark.slow
def test_concurrent_plans_send_one_request_at_a_time():
    server = SingleSlot([0.2, 0.2, 0.2])

    async def go() -> list[Any]:
        planner = LLMPlanner(LLMConfig(base_url="http://primary.test/v1"), None,
                             transport=httpx.MockTransport(server))
        try:
            return await asyncio.gather(*(planner.plan(request()) for _ in range(3)))
        finally:
            await planner.aclose()

    results = asyncio.run(asyncio.wait_for(go(), 60))
    assert len(results) == 3 and server.piled == 0


def test_server_without_a_probe_is_left_alone_for_the_request_timeout():
    answers = [httpx.ReadTimeout("slow"), plan_reply()]
    server = Server(primary=answers, models=[httpx.Response(404)])
    planner, sleeps = make(server, request_timeout_s=40, timeout_s=300)
    run(planner)
    assert len(server.gets) == 1
    assert sleeps[-1] == pytest.approx(40, abs=1)  # stayed away as long as the abandoned request may run


def test_server_without_a_probe_busy_past_the_deadline_fails_without_sending():
    server = Server(primary=[httpx.ReadTimeout("slow"), plan_reply()], models=[httpx.Response(404)])
    planner, _ = make(server, request_timeout_s=100, timeout_s=60)
    exc = fails(planner, LLMUnavailable)
    assert "still be busy" in exc.reason
    assert len(server.requests) == 1


# -- the pure readers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "doc", "refusal"),
    [
        (500, LLAMA_CPP_PYTHON_500, True),
        (400, {"error": {"message": "Invalid schema for response_format 'plan'"}}, True),
        (422, {"detail": [{"loc": ["body", "response_format"], "msg": "extra fields not permitted"}]}, True),
        (400, OPENAI_CONTEXT_400, False),
        (400, OPENAI_MAX_TOKENS_400, False),
        (400, {"error": {"message": "messages: invalid role"}}, False),
        (503, {"error": {"message": "response_format queue full"}}, False),
    ],
)
def test_refuses_format(status, doc, refusal):
    assert wire.refuses_format(status, json.dumps(doc).encode()) is refusal


def test_a_completion_body_is_read_for_content_finish_and_usage():
    doc = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]},
                        "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": True}}
    reply = wire.read_completion("application/json", json.dumps(doc).encode())
    assert (reply.content, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == (
        "ab", "stop", 3, None
    )


# -- tokens spent on a plan that failed ----------------------------------------------------------


def test_an_invalid_plan_carries_the_tokens_its_requests_spent():
    replies = [completion("no plan", usage=(300, 40)), completion("still none", usage=(350, 30))]
    server = Server(primary=replies)
    exc = fails(make(server)[0], PlanInvalid)
    assert exc.tokens == {"prompt": 650, "completion": 70}


@pytest.mark.slow
def test_ping_of_a_single_slot_server_busy_with_our_request_says_reachable(monkeypatch):
    monkeypatch.setattr("autod.planner.llm.PING_TIMEOUT_S", 0.1)
    server = SingleSlot([1.0])

    async def go() -> tuple[bool, bool]:
        planner = LLMPlanner(LLMConfig(base_url="http://primary.test/v1"), None,
                             transport=httpx.MockTransport(server))
        try:
            idle = await planner.ping()
            task = asyncio.create_task(planner.plan(request()))
            while not server.busy:
                await asyncio.sleep(0.01)
            busy = await asyncio.wait_for(planner.ping(), 5)
            await task
            return idle, busy
        finally:
            await planner.aclose()

    assert asyncio.run(asyncio.wait_for(go(), 60)) == (True, True)
