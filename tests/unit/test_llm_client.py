"""LLMPlanner over httpx.MockTransport: request shape, negotiation, repair, retries, deadline, fallback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from autod.config.settings import LLMConfig, LLMEndpoint
from autod.errors import ContextTooLong, CycleError, LLMUnavailable, PlanInvalid
from autod.events import Event, EventKind
from autod.plan import plan_schema
from autod.planner import CHARS_PER_TOKEN, PlanRequest
from autod.planner.llm import MAX_REPLY_BYTES, LLMPlanner

PRIMARY = "http://primary.test/v1"
FALLBACK = "http://fallback.test/v1"
KEY = "sk-primary-SECRET-0123456789"
FB_KEY = "sk-fallback-SECRET-9876543210"
PROMPT_MARKER = "UNIQUE-PROMPT-TEXT-41b7"
PLAN = {"summary": "guard the division", "edits": [], "verify": ["tests"], "report": None}

Answer = httpx.Response | Exception | Callable[[httpx.Request], Any]


def completion(
    content: str, finish: str = "stop", usage: tuple[int, int] | None = (100, 20)
) -> httpx.Response:
    message = {"role": "assistant", "content": content}
    doc: dict[str, Any] = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if usage is not None:
        doc["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return httpx.Response(200, json=doc)


def plan_reply(plan: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return completion(json.dumps(plan or PLAN), **kw)


class Server:
    """Answers POSTs per host from a script; the last answer repeats. Records every request.

    GET /models (the ping, and the probe after an abandoned request) answers from `models`, 200 by
    default, and does not consume the POST script.
    """

    def __init__(self, *, models: list[Answer] | None = None, **scripts: list[Answer]) -> None:
        self.scripts = {host: list(answers) for host, answers in scripts.items()}
        self.models = list(models) if models else [httpx.Response(200, json={"data": []})]
        self.requests: list[httpx.Request] = []
        self.gets: list[httpx.Request] = []

    def bodies(self, host: str = "primary") -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.url.host == f"{host}.test"]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.gets.append(request)
            script = self.models
        else:
            self.requests.append(request)
            script = self.scripts[request.url.host.split(".")[0]]
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            answer = answer(request)
            if asyncio.iscoroutine(answer):
                answer = await answer
        return answer


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make(server: Server, *, key: str | None = KEY, clock: Callable[[], float] | None = None, **cfg: Any):
    cfg.setdefault("base_url", PRIMARY)
    sleeps = Sleeps()
    extra = {"clock": clock} if clock is not None else {}
    planner = LLMPlanner(LLMConfig(**cfg), key, transport=httpx.MockTransport(server), sleep=sleeps, **extra)
    return planner, sleeps


def request() -> PlanRequest:
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f")
    messages = [
        {"role": "system", "content": "You write plans."},
        {"role": "user", "content": f"Fix it. {PROMPT_MARKER}"},
    ]
    return PlanRequest(mode="auto-debug", event=event, messages=messages)


def run(planner: LLMPlanner, req: PlanRequest | None = None):
    async def go():
        try:
            return await planner.plan(req or request())
        finally:
            await planner.aclose()

    return asyncio.run(go())


def run_many(planner: LLMPlanner, n: int) -> list[Any]:
    """n plans in one event loop; each outcome is a PlanResult or the exception raised."""

    async def go():
        out: list[Any] = []
        for _ in range(n):
            try:
                out.append(await planner.plan(request()))
            except CycleError as exc:
                out.append(exc)
        await planner.aclose()
        return out

    return asyncio.run(go())


def fails(planner: LLMPlanner, exc_type: type[Exception]) -> Exception:
    with pytest.raises(exc_type) as info:
        run(planner)
    return info.value


# -- request shape --------------------------------------------------------------------


def test_plan_posts_chat_completion_with_schema_and_returns_the_plan():
    server = Server(primary=[plan_reply()])
    planner, _ = make(server, model="m1", temperature=0.3, max_tokens=512)
    result = run(planner)
    assert result.plan.summary == PLAN["summary"]
    assert result.endpoint == PRIMARY
    req = server.requests[0]
    assert req.method == "POST" and str(req.url) == f"{PRIMARY}/chat/completions"
    body = json.loads(req.content)
    assert body["model"] == "m1" and body["temperature"] == 0.3 and body["max_tokens"] == 512
    assert body["messages"] == request().messages
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "plan", "schema": plan_schema(), "strict": True},
    }
    assert (result.tokens.prompt, result.tokens.completion) == (100, 20)


def test_bearer_key_is_sent_only_when_given():
    server = Server(primary=[plan_reply()])
    run(make(server, key=KEY)[0])
    run(make(server, key=None)[0])
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "authorization" not in server.requests[1].headers


def test_missing_usage_is_estimated_from_text_length():
    content = json.dumps(PLAN)
    server = Server(primary=[completion(content, usage=None)])
    result = run(make(server)[0])
    prompt_chars = sum(len(m["content"]) for m in request().messages)
    # code tokenizes densely: a prompt counted nowhere is estimated at ~3 characters a token, never under
    assert result.tokens.prompt == int(prompt_chars / CHARS_PER_TOKEN)
    assert result.tokens.completion == len(content) // 4


# -- response_format negotiation ------------------------------------------------------


def test_refused_json_schema_falls_back_to_json_object_and_is_remembered():
    refusal = httpx.Response(400, json={"error": {"message": "response_format json_schema not supported"}})
    server = Server(primary=[refusal, plan_reply()])
    planner, _ = make(server)
    results = run_many(planner, 2)
    assert all(r.plan.summary == PLAN["summary"] for r in results)
    formats = [b.get("response_format", {}).get("type") for b in server.bodies()]
    assert formats == ["json_schema", "json_object", "json_object"]


def test_each_refused_format_moves_on_at_once_down_to_no_response_format():
    server = Server(
        primary=[
            httpx.Response(422, text="unsupported field: schema"),
            httpx.Response(400, json={"error": {"message": "response_format: extra key 'schema'"}}),
            httpx.Response(400, json={"error": {"message": "response_format json_object is not supported"}}),
            plan_reply(),
        ]
    )
    planner, sleeps = make(server)
    result = run(planner)
    assert result.plan.summary == PLAN["summary"]
    formats = [b.get("response_format") for b in server.bodies()]
    assert [f and f["type"] for f in formats] == ["json_schema", "json_object", "json_object", None]
    assert formats[1] == {"type": "json_object", "schema": plan_schema()}  # llama.cpp's JSON mode + schema
    assert formats[2] == {"type": "json_object"}
    assert sleeps == []  # a refusal is not retried


def test_the_schema_names_the_paths_a_plan_may_edit_where_the_format_carries_one():
    """llama.cpp turns the schema into a grammar: a path outside the enum cannot be generated."""
    paths = ("src/calc.py", "src/util.py")
    refusal = httpx.Response(500, text="response_format: Input should be 'text' or 'json_object'")
    server = Server(primary=[refusal, refusal, plan_reply()])
    planner, _ = make(server)
    run(planner, dataclasses.replace(request(), paths=paths))
    formats = [b["response_format"] for b in server.bodies()]

    def path_of(schema: dict) -> dict:  # the search/replace shape names any editable path
        return schema["properties"]["edits"]["items"]["anyOf"][-1]["properties"]["path"]

    strict = path_of(formats[0]["json_schema"]["schema"])
    grammar = path_of(formats[1]["schema"])
    assert strict == grammar == {"type": "string", "enum": list(paths)}
    assert formats[2] == {"type": "json_object"}  # no schema, nothing to narrow

    server = Server(primary=[plan_reply(), plan_reply()])
    run(make(server, response_format="json_object")[0], dataclasses.replace(request(), paths=paths))
    run(make(server, response_format="json_object", constrain_paths=False)[0],
        dataclasses.replace(request(), paths=paths))
    run(make(server, response_format="json_object")[0])  # a request without paths
    narrowed, free, unknown = (b["response_format"]["schema"] for b in server.bodies())
    assert narrowed == plan_schema(paths) and narrowed != plan_schema()
    assert free == unknown == plan_schema()


def test_a_request_may_sample_warmer_than_llm_temperature_for_itself_only():
    server = Server(primary=[plan_reply()])
    planner, _ = make(server, temperature=0.1)

    async def go() -> None:
        await planner.plan(dataclasses.replace(request(), temperature=0.7))
        await planner.plan(request())
        await planner.aclose()

    asyncio.run(go())
    assert [b["temperature"] for b in server.bodies()] == [0.7, 0.1]


def test_422_unrelated_to_the_format_is_not_negotiated_away():
    server = Server(primary=[httpx.Response(422, text="messages: too long")])
    exc = fails(make(server)[0], LLMUnavailable)
    assert "HTTP 422" in exc.reason
    assert len(server.requests) == 1


def test_400_about_something_else_is_unavailable_and_nothing_is_negotiated_away():
    bad = httpx.Response(400, json={"error": {"message": "messages.1.role: must be user or assistant"}})
    server = Server(primary=[bad])
    planner, _ = make(server)
    outcomes = run_many(planner, 2)
    assert all(isinstance(o, LLMUnavailable) and "HTTP 400" in o.reason for o in outcomes)
    types = [b.get("response_format", {}).get("type") for b in server.bodies()]
    assert types == ["json_schema", "json_schema"]


@pytest.mark.parametrize(
    ("forced", "expected"),
    [("json_object", {"type": "json_object", "schema": plan_schema()}), ("none", None)],
)
def test_forced_response_format_is_sent_as_configured(forced, expected):
    server = Server(primary=[plan_reply()])
    run(make(server, response_format=forced)[0])
    assert server.bodies()[0].get("response_format") == expected


def test_forced_format_refusal_is_not_negotiated():
    server = Server(primary=[httpx.Response(400, text="response_format not supported")])
    exc = fails(make(server, response_format="json_schema")[0], LLMUnavailable)
    assert "HTTP 400" in exc.reason
    assert len(server.requests) == 1


# -- repair round and length limit ----------------------------------------------------


def test_invalid_reply_gets_one_repair_round_carrying_the_error():
    bad = '{"summary": "x", "edits": [{"path": "a.py", "replace": "y"}]}'
    server = Server(primary=[completion(bad, usage=(10, 5)), plan_reply(usage=(30, 7))])
    result = run(make(server)[0])
    assert result.plan.summary == PLAN["summary"]
    second = server.bodies()[1]["messages"]
    assert second[:2] == request().messages
    assert second[2] == {"role": "assistant", "content": bad}
    assert second[3]["role"] == "user"
    assert "edits.0: value error, give `symbol`" in second[3]["content"]
    assert second[3]["content"].startswith("Your reply was not a valid plan:")
    assert (result.tokens.prompt, result.tokens.completion) == (40, 12)


def test_still_invalid_after_the_repair_round_raises_plan_invalid():
    server = Server(primary=[completion("no plan here"), completion("still nothing")])
    exc = fails(make(server)[0], PlanInvalid)
    assert "no JSON object" in exc.reason
    assert len(server.requests) == 2


def test_reply_cut_off_by_length_is_never_parsed_and_asked_again_with_a_nudge_at_the_same_cap():
    cut = {**PLAN, "summary": "cut-off plan that happens to parse"}
    # cut at autod's own cap (the counted reply is as long as the cap): the model ran long
    server = Server(primary=[plan_reply(cut, finish="length", usage=(100, 1000)), plan_reply()])
    result = run(make(server, max_tokens=1000)[0])
    assert result.plan.summary == PLAN["summary"]
    first, second = server.bodies()
    # never doubled: a tiny model on a CPU would run for minutes
    assert first["max_tokens"] == 1000 and second["max_tokens"] == 1000
    assert "cut off" in second["messages"][-1]["content"]
    assert [m["role"] for m in second["messages"]] == ["system", "user"]  # roles still alternate


def test_cut_off_twice_raises_plan_invalid():
    server = Server(primary=[plan_reply(finish="length", usage=(100, 1500))])
    exc = fails(make(server)[0], PlanInvalid)
    assert exc.reason == "reply cut off by the length limit (1500 tokens) twice"
    assert len(server.requests) == 2


@pytest.mark.parametrize("n", [1, 3])
def test_a_reply_longer_than_its_token_cap_can_write_is_never_parsed(monkeypatch, n):
    """Its code's parse would hold the GIL for seconds (2.7 MB of one-token lines: 5 s)."""
    from autod.planner import llm as planner_llm

    parsed: list[int] = []
    real = planner_llm.parse_plan
    monkeypatch.setattr(planner_llm, "parse_plan", lambda text: parsed.append(len(text)) or real(text))
    cap = 1000
    most = cap * planner_llm.MAX_CHARS_PER_TOKEN
    too_long = json.dumps(PLAN) + "\n" * most
    honest = json.dumps(PLAN) + "\n" * (most - 500)
    choices = [{"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
               for i, text in enumerate([too_long, *[json.dumps(PLAN)] * (n - 1)])]
    server = Server(primary=[httpx.Response(200, json={"choices": choices})])
    exc = fails(make(server, max_tokens=cap)[0], PlanInvalid)
    assert "more than 1000 tokens can write" in exc.reason and parsed == []
    server = Server(primary=[completion(honest)])
    assert run(make(server, max_tokens=cap)[0]).plan.summary == PLAN["summary"]  # long, not too long
    assert parsed == [len(honest)]
    # a cap the operator raised (llm.max_tokens up to 200,000) does not raise what autod parses
    huge = json.dumps(PLAN) + "\n" * planner_llm.MAX_REPLY_CHARS
    server = Server(primary=[completion(huge)])
    exc = fails(make(server, max_tokens=100_000)[0], PlanInvalid)
    assert "or autod reads" in exc.reason and parsed == [len(honest)]


# -- garbled replies ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "words"),
    [
        (httpx.Response(200, text="<html>gateway</html>"), "not JSON"),
        (httpx.Response(200, json={"object": "chat.completion"}), "no choices"),
        (httpx.Response(200, json={"choices": []}), "no choices"),
        (httpx.Response(200, content=b'{"choices": [{"message": {"content": "{\\"summ'), "not JSON"),
    ],
)
def test_a_garbled_200_body_is_the_servers_fault_not_the_models(response, words):
    """Not a chat completion at all: the server (or a proxy) is broken, so it is an outage, retried later
    by the dispatcher, not an invalid plan asked again at once."""
    server = Server(primary=[response])
    exc = fails(make(server)[0], LLMUnavailable)
    assert words in exc.reason
    assert len(server.requests) == 1


def test_reply_over_the_size_cap_is_rejected_by_declared_length():
    server = Server(primary=[httpx.Response(200, content=b" " * (MAX_REPLY_BYTES + 1))])
    assert fails(make(server)[0], PlanInvalid).reason == "reply too large"


def test_reply_over_the_size_cap_is_rejected_while_streaming():
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX_REPLY_BYTES // 65536 + 2):
            yield b" " * 65536

    server = Server(primary=[lambda _req: httpx.Response(200, content=chunks())])
    assert fails(make(server)[0], PlanInvalid).reason == "reply too large"


# -- retries and deadline -------------------------------------------------------------


def test_5xx_is_retried_with_growing_jittered_backoff():
    server = Server(primary=[httpx.Response(500), httpx.Response(503), httpx.Response(502), plan_reply()])
    planner, sleeps = make(server, max_retries=3)
    assert run(planner).plan.summary == PLAN["summary"]
    assert len(server.requests) == 4
    # base 1s doubling, jitter in the upper half of each step
    assert 0.5 <= sleeps[0] <= 1 and 1 <= sleeps[1] <= 2 and 2 <= sleeps[2] <= 4


@pytest.mark.parametrize("status", [408, 429])
def test_408_and_429_are_retried(status):
    server = Server(primary=[httpx.Response(status), plan_reply()])
    assert run(make(server)[0]).plan.summary == PLAN["summary"]
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(status):
    server = Server(primary=[httpx.Response(status, text="nope"), plan_reply()])
    exc = fails(make(server, response_format="json_object")[0], LLMUnavailable)
    assert f"HTTP {status}" in exc.reason
    assert len(server.requests) == 1


def test_retries_are_capped_by_max_retries():
    server = Server(primary=[httpx.Response(500)])
    exc = fails(make(server, max_retries=2)[0], LLMUnavailable)
    assert "HTTP 500" in exc.reason and "3 attempts" in exc.reason
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    "error",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("disconnected")],
)
def test_connect_errors_and_timeouts_are_retried(error):
    server = Server(primary=[error, plan_reply()])
    assert run(make(server)[0]).plan.summary == PLAN["summary"]
    assert len(server.requests) == 2


def test_retry_after_seconds_is_honoured():
    server = Server(primary=[httpx.Response(429, headers={"Retry-After": "7"}), plan_reply()])
    planner, sleeps = make(server)
    run(planner)
    assert sleeps == [7.0]


def test_retry_after_http_date_is_honoured():
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    server = Server(primary=[httpx.Response(503, headers={"Retry-After": when}), plan_reply()])
    planner, sleeps = make(server)
    run(planner)
    assert len(sleeps) == 1 and 10 <= sleeps[0] <= 20


def test_retry_after_beyond_the_deadline_fails_without_waiting():
    server = Server(primary=[httpx.Response(429, headers={"Retry-After": "600"}), plan_reply()])
    planner, sleeps = make(server, timeout_s=30)
    exc = fails(planner, LLMUnavailable)
    assert "deadline" in exc.reason and "HTTP 429" in exc.reason
    assert sleeps == [] and len(server.requests) == 1


@pytest.mark.slow
def test_hang_past_the_deadline_is_unavailable():
    async def hang(_req: httpx.Request) -> httpx.Response:
        await asyncio.sleep(60)
        return plan_reply()

    server = Server(primary=[hang])
    exc = fails(make(server, timeout_s=0.2)[0], LLMUnavailable)
    assert exc.reason.startswith("deadline of 0.2s exceeded")


# -- fallback -------------------------------------------------------------------------


def fallback_cfg(**kw: Any) -> dict[str, Any]:
    fb = LLMEndpoint(base_url=FALLBACK, model="fb-model", api_key=FB_KEY)
    return {"fallback": fb, "max_retries": 0, **kw}


def test_unavailable_primary_hands_the_request_to_the_fallback():
    server = Server(primary=[httpx.Response(500)], fallback=[plan_reply()])
    result = run(make(server, **fallback_cfg())[0])
    assert result.endpoint == FALLBACK
    fb_req = next(r for r in server.requests if r.url.host == "fallback.test")
    assert fb_req.headers["authorization"] == f"Bearer {FB_KEY}"
    assert json.loads(fb_req.content)["model"] == "fb-model"
    assert json.loads(fb_req.content)["messages"] == request().messages


def test_invalid_plan_does_not_go_to_the_fallback():
    server = Server(primary=[completion("nothing")], fallback=[plan_reply()])
    fails(make(server, **fallback_cfg())[0], PlanInvalid)
    assert server.bodies("fallback") == []


def test_three_primary_failures_bench_it_for_five_minutes():
    now = [1000.0]
    server = Server(primary=[httpx.Response(500)], fallback=[plan_reply()])
    planner, _ = make(server, clock=lambda: now[0], **fallback_cfg())

    async def go() -> list[str]:
        seen = []
        for advance in (0, 0, 0, 0, 10, 301):
            now[0] += advance
            seen.append(planner.endpoint)
            await planner.plan(request())
        await planner.aclose()
        return seen

    seen = asyncio.run(go())
    assert seen == [PRIMARY, PRIMARY, PRIMARY, FALLBACK, FALLBACK, PRIMARY]
    assert len(server.bodies("primary")) == 4  # three failures, none while benched, one after
    assert len(server.bodies("fallback")) == 6


# -- ping -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "up"),
    [
        (httpx.Response(200, json={"data": []}), True),
        (httpx.Response(503), False),
        (httpx.ConnectError("x"), False),
    ],
)
def test_ping_reports_whether_models_answers(answer, up):
    server = Server(primary=[plan_reply()], models=[answer])
    planner, _ = make(server)

    async def go() -> bool:
        try:
            return await planner.ping()
        finally:
            await planner.aclose()

    assert asyncio.run(go()) is up
    assert str(server.gets[0].url) == f"{PRIMARY}/models"


# -- secrets and logs -----------------------------------------------------------------


def test_keys_never_appear_in_errors_logs_or_repr():
    echo = httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}})
    fb_echo = httpx.Response(200, text=f"bad key {FB_KEY}")
    server = Server(primary=[echo], fallback=[fb_echo])
    planner, _ = make(server, **fallback_cfg())
    with capture_logs() as logs:
        exc = fails(planner, LLMUnavailable)
    rendered = str(exc) + repr(exc) + json.dumps(logs, default=str) + repr(planner)
    assert "bad key ***" in exc.reason  # the excerpt is still shown, redacted
    assert KEY not in rendered and FB_KEY not in rendered
    assert any(entry["event"] == "llm.fallback" for entry in logs)

    server = Server(primary=[echo])
    with capture_logs() as logs:
        exc = fails(make(server)[0], LLMUnavailable)
    assert "HTTP 401" in exc.reason
    assert KEY not in str(exc) + json.dumps(logs, default=str)


def test_each_attempt_is_logged_and_retries_warn_without_the_prompt():
    server = Server(primary=[httpx.Response(503), plan_reply()])
    planner, _ = make(server)
    with capture_logs() as logs:
        run(planner)
    attempts = [e for e in logs if e["event"] == "llm.request"]
    retries = [e for e in logs if e["event"] == "llm.retry"]
    def shape(entries: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
        return [(e["log_level"], e["attempt"], e["status"]) for e in entries]

    assert shape(attempts) == [("debug", 1, 503), ("debug", 2, 200)]
    assert shape(retries) == [("warning", 1, 503)]
    dumped = json.dumps(logs, default=str)
    assert PROMPT_MARKER not in dumped and KEY not in dumped


def test_planner_without_base_url_is_refused():
    with pytest.raises(ValueError, match="base_url"):
        LLMPlanner(LLMConfig(), None)


def test_both_endpoints_unavailable_names_both_failures():
    server = Server(primary=[httpx.Response(502)], fallback=[httpx.Response(404, text="no such model")])
    exc = fails(make(server, **fallback_cfg())[0], LLMUnavailable)
    assert "HTTP 502" in exc.reason and "fallback: HTTP 404" in exc.reason
    assert "no such model" in exc.reason


def test_a_reply_cut_well_before_the_cap_teaches_the_servers_window():
    """llama-cpp-python states its context nowhere and shortens a reply silently when the prompt
    fills it: a reply that stopped for length far under the cap gives the window away."""
    server = Server(primary=[plan_reply(finish="length", usage=(7400, 790))])
    planner, _ = make(server, max_tokens=1500)
    exc = fails(planner, ContextTooLong)
    assert isinstance(exc, ContextTooLong) and exc.limit == 8190 and exc.prompt_tokens == 7400
    assert 0.2 <= exc.fit() < 0.9  # the cycle asks again with its context cut to fit

    async def window() -> int | None:
        return await planner.context_window()

    assert asyncio.run(window()) == 8190
    # a reply cut at the cap itself is the model's length, not the server's window
    server = Server(primary=[plan_reply(finish="length", usage=(700, 1500)), plan_reply()])
    assert run(make(server, max_tokens=1500)[0]).plan.summary == PLAN["summary"]


def test_with_the_window_known_the_reply_cap_is_fitted_before_sending_not_after_a_refusal():
    """A window of 2,000 tokens, a prompt of ~1,100 (3 characters a token until the server counts),
    a cap of 1,500: the request goes out with the cap lowered, not to be refused or cut first."""
    server = Server(primary=[plan_reply()])
    planner, _ = make(server, max_tokens=1500, context_tokens=2000)
    big = dataclasses.replace(request(), messages=[{"role": "user", "content": "x" * 3000}])
    with capture_logs() as logs:
        run(planner, big)
    assert 256 <= server.bodies()[0]["max_tokens"] < 1500 and len(server.bodies()) == 1
    assert any(x["event"] == "llm.reply_cap_fitted" for x in logs)
    # a prompt that leaves the whole cap is sent with it
    server = Server(primary=[plan_reply()])
    run(make(server, max_tokens=1500, context_tokens=8000)[0], big)
    assert server.bodies()[0]["max_tokens"] == 1500


# -- the code reply form (llm.reply_form: code) -------------------------------------------

CODE_REPLY = "add subtracted.\n\n### src/calc.py · add\n```python\ndef add(a, b):\n    return a + b\n```\n"


def code_request(**kw: Any) -> PlanRequest:
    return dataclasses.replace(request(), form="code", paths=("src/calc.py",),
                               symbols={"src/calc.py": ("add", "Calc.add")}, **kw)


def test_a_code_form_request_carries_no_response_format_and_its_fenced_reply_is_the_plan():
    server = Server(primary=[completion(CODE_REPLY)])
    result = run(make(server)[0], code_request(stop=("## Failure output",)))
    assert "response_format" not in server.bodies()[0]  # no grammar: the model writes plain text
    assert server.bodies()[0]["stop"] == ["## Failure output"]
    assert result.plan.summary == "add subtracted."
    (edit,) = result.plan.edits
    assert (edit.path, edit.symbol) == ("src/calc.py", "add")
    assert edit.replace == "def add(a, b):\n    return a + b\n"
    # the JSON form's negotiation is untouched by a code-form request: the next JSON request is strict
    server = Server(primary=[completion(CODE_REPLY), plan_reply()])
    planner, _ = make(server)

    async def both() -> None:
        await planner.plan(code_request())
        await planner.plan(request())
        await planner.aclose()

    asyncio.run(both())
    assert [b.get("response_format", {}).get("type") for b in server.bodies()] == [None, "json_schema"]
    assert "stop" not in server.bodies()[1]


def test_a_code_form_reply_autod_cannot_place_gets_a_repair_round_in_its_own_words():
    unplaced = "```python\ndef add(a, b):\n    return a + b\n```"  # `add` is shown twice, no header
    server = Server(primary=[completion(unplaced), completion(CODE_REPLY)])
    result = run(make(server)[0], code_request())
    assert result.plan.edits[0].symbol == "add"
    repair = server.bodies()[1]["messages"][-1]["content"]
    assert "2 shown places" in repair and "### path · symbol" in repair and "JSON" not in repair


def test_code_form_choices_stand_alone_and_a_cut_reply_is_nudged_in_the_code_form():
    two = httpx.Response(200, json={"choices": [
        {"index": 0, "message": {"role": "assistant", "content": CODE_REPLY}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": "```python\nx\n```"},
         "finish_reason": "stop"},
    ], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    result = run(make(Server(primary=[two]))[0], code_request(n=2))
    assert result.plan.edits[0].symbol == "add" and len(result.invalid) == 1
    server = Server(primary=[completion("### src/calc.py · add\n```python\ndef add(", finish="length",
                                        usage=(10, 1500)),
                             completion(CODE_REPLY)])
    run(make(server)[0], code_request())
    nudge = server.bodies()[1]["messages"][-1]["content"]
    assert "cut off" in nudge and "### path · symbol" in nudge and "JSON" not in nudge


def test_a_server_that_refuses_stop_is_asked_again_without_it_and_never_sent_it_again():
    refusal = httpx.Response(400, json={"error": {"message": "Unsupported parameter: 'stop' is not "
                                                  "supported with this model.", "param": "stop"}})
    server = Server(primary=[refusal, completion(CODE_REPLY)])
    planner, sleeps = make(server)

    async def twice() -> None:
        for _ in range(2):
            await planner.plan(code_request(stop=("## Failure output",)))
        await planner.aclose()

    with capture_logs() as logs:
        asyncio.run(twice())
    assert ["stop" in b for b in server.bodies()] == [True, False, False]
    assert sleeps == [] and any(e["event"] == "llm.stop_refused" for e in logs)


def test_a_reply_and_the_prompt_it_quotes_are_parsed_off_the_loop(monkeypatch):
    """A reply is untrusted text of up to 4 MiB, and reading it parses Python: never on the event loop
    (the loop also answers `autod status` and runs every source), for one choice and for several."""
    from autod.planner import llm as llm_mod

    seen: list[str] = []
    for name in ("parse_code_reply", "parse_plan", "quoted_code"):
        real = getattr(llm_mod, name)

        def noting(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            seen.append(f"{_name}:{threading.current_thread() is threading.main_thread()}")
            return _real(*a, **k)

        monkeypatch.setattr(llm_mod, name, noting)
    run(make(Server(primary=[completion(CODE_REPLY)]))[0], code_request())
    run(make(Server(primary=[plan_reply()]))[0], request())
    two = httpx.Response(200, json={"choices": [
        {"index": i, "message": {"role": "assistant", "content": CODE_REPLY}, "finish_reason": "stop"}
        for i in range(2)], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    run(make(Server(primary=[two]))[0], code_request(n=2))
    assert {s.split(":")[0] for s in seen} == {"parse_code_reply", "parse_plan", "quoted_code"}, seen
    assert all(s.endswith(":False") for s in seen), seen


def test_every_request_asks_for_an_uncompressed_reply():
    """The reply cap counts bytes as they come; a compressed reply would be unpacked before it is seen
    (a 10 MB gzip body unpacks to 10 GiB): autod asks for none."""
    server = Server(primary=[plan_reply()])
    run(make(server)[0])
    assert server.requests and all(r.headers.get("accept-encoding") == "identity" for r in server.requests)


def test_an_exchange_is_recorded_off_the_event_loop():
    """Recording redacts the whole reply (0.5 s a megabyte): it held the loop 2.4-3.0 s for a refused
    reply of 2.5 MB. It runs in a worker thread, one exchange at a time, before the reply is read."""
    import dataclasses
    import threading

    seen: list[tuple[bool, str]] = []
    main = threading.main_thread()

    def record(entry: dict[str, Any]) -> None:
        seen.append((threading.current_thread() is main, str(entry.get("status"))))

    server = Server(primary=[plan_reply()])
    result = run(make(server)[0], dataclasses.replace(request(), record=record))
    assert result.plan.summary == PLAN["summary"]
    assert seen == [(False, "200")]
