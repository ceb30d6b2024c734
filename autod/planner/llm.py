"""The LLM planner: an OpenAI-compatible chat client that returns a validated Plan.

One plan() call may make several requests, all inside one deadline (cfg.timeout_s): retries of
transient failures, one repair round for an invalid reply, one larger retry for a reply cut off by
the token limit, and the fallback endpoint when the primary is unavailable.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import structlog

from autod.config import LLMConfig
from autod.errors import LLMUnavailable, PlanInvalid
from autod.plan import Plan, plan_schema
from autod.planner import PlanRequest, PlanResult, TokenUsage
from autod.planner.parse import parse_plan

log = structlog.get_logger(__name__)

MAX_REPLY_BYTES = 4 * 1024 * 1024
_ERROR_BODY_BYTES = 64 * 1024  # of an error response: enough for its message
_EXCERPT = 200
_REPAIR_ECHO_CHARS = 64_000  # the invalid reply sent back in the repair round, at most
PING_TIMEOUT_S = 5.0
BENCH_AFTER_FAILURES = 3  # consecutive unavailable plans on the primary ...
BENCH_FOR_S = 300.0  # ... send plans straight to the fallback for this long

FORMATS_AUTO = ("json_schema", "json_object", "none")
LENGTH_NUDGE = (
    "Your previous reply was cut off by the length limit. Reply with one complete JSON object only: "
    "fewer, smaller edits and a shorter summary."
)

Sleep = Callable[[float], Awaitable[None]]


def _retryable(status: int) -> bool:
    return status in (408, 429) or 500 <= status <= 599


@dataclass
class _Reply:
    content: str
    finish_reason: str | None


class _Endpoint:
    """One OpenAI-compatible server: HTTP with retries, reply size cap, response_format negotiation."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        cfg: LLMConfig,
        *,
        transport: httpx.AsyncBaseTransport | None,
        secrets: list[str],
        sleep: Sleep,
        retry_base_s: float,
        retry_max_s: float,
    ) -> None:
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.url = re.sub(r"//[^/@]*@", "//", base_url)  # never show userinfo credentials
        self.model = model
        self._cfg = cfg
        self._secrets = secrets
        self._sleep = sleep
        self._retry_base_s = retry_base_s
        self._retry_max_s = retry_max_s
        # auto: try the strictest format first and remember the first one the server takes
        self._formats = list(FORMATS_AUTO) if cfg.response_format == "auto" else [cfg.response_format]
        self.client = httpx.AsyncClient(
            base_url=base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(cfg.request_timeout_s, connect=min(10.0, cfg.request_timeout_s)),
            transport=transport,
            follow_redirects=False,
        )

    async def complete(
        self, messages: list[dict[str, str]], max_tokens: int, usage: TokenUsage, deadline: float
    ) -> _Reply:
        """One chat completion (with retries). Raises LLMUnavailable, or PlanInvalid for a garbled body."""
        for i, fmt in enumerate(self._formats):
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "temperature": self._cfg.temperature,
                "max_tokens": max_tokens,
            }
            if fmt != "none":
                body["response_format"] = _response_format(fmt)
            status, data = await self._send(body, deadline, fmt)
            untried = self._formats[i + 1 :]
            if untried and _refuses_format(status, data):
                log.warning("llm_response_format_refused", endpoint=self.url, status=status,
                            response_format=fmt, next_format=untried[0])
                continue
            if not 200 <= status < 300:
                raise LLMUnavailable(f"HTTP {status} from {self.url}/chat/completions: {self._excerpt(data)}")
            self._formats = [fmt]  # this server takes it: use it for the life of the planner
            return self._read_reply(data, messages, usage)
        raise AssertionError("unreachable: the last format always returns or raises")

    async def _send(self, body: dict[str, Any], deadline: float, fmt: str) -> tuple[int, bytes]:
        """POST with retries for 408/429/5xx, connect errors and timeouts. Returns (status, body)."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            attempt += 1
            started = loop.time()
            retry_after: float | None = None
            try:
                status, headers, data = await self._post(body)
            except httpx.TimeoutException:
                failure, status = "request timed out", None
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                failure, status = f"{type(exc).__name__}: {self._excerpt(str(exc).encode())}", None
            except httpx.HTTPError as exc:
                raise LLMUnavailable(f"{self.url}: {type(exc).__name__}") from None
            else:
                log.debug("llm_request", endpoint=self.url, attempt=attempt, status=status,
                          response_format=fmt, bytes=len(data),
                          duration_ms=round((loop.time() - started) * 1000))
                if not _retryable(status):
                    return status, data
                failure = f"HTTP {status}"
                if status in (429, 503):
                    retry_after = _retry_after(headers.get("retry-after"))
            if status is None:
                log.debug("llm_request", endpoint=self.url, attempt=attempt, error=failure,
                          duration_ms=round((loop.time() - started) * 1000))
            if attempt > self._cfg.max_retries:
                raise LLMUnavailable(f"{failure} from {self.url} after {attempt} attempts")
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            if loop.time() + delay >= deadline:
                # Sleeping into the deadline gains nothing; failing now leaves time for the fallback.
                raise LLMUnavailable(
                    f"{failure} from {self.url}; a retry in {delay:.1f}s would pass the deadline"
                )
            log.warning("llm_retry", endpoint=self.url, attempt=attempt, status=status, error=failure,
                        delay_s=round(delay, 2))
            await self._sleep(delay)

    async def _post(self, body: dict[str, Any]) -> tuple[int, httpx.Headers, bytes]:
        async with self.client.stream("POST", "chat/completions", json=body) as resp:
            ok = resp.is_success
            cap = MAX_REPLY_BYTES if ok else _ERROR_BODY_BYTES
            declared = resp.headers.get("content-length", "")
            if ok and declared.isdigit() and int(declared) > cap:
                raise PlanInvalid("reply too large")
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    if ok:
                        raise PlanInvalid("reply too large")
                    break  # an error body: its start is all we show
                chunks.append(chunk)
            return resp.status_code, resp.headers, b"".join(chunks)

    def _read_reply(self, data: bytes, messages: list[dict[str, str]], usage: TokenUsage) -> _Reply:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise PlanInvalid(f"the reply body is not JSON: {self._excerpt(data)}") from None
        choices = doc.get("choices") if isinstance(doc, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise PlanInvalid(f"the reply has no choices: {self._excerpt(data)}")
        message = choices[0].get("message")
        content = _text(message.get("content") if isinstance(message, dict) else None)
        finish = choices[0].get("finish_reason")
        counted = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
        prompt, completion = counted.get("prompt_tokens"), counted.get("completion_tokens")
        # A server that omits usage still spends tokens: estimate ~4 characters per token.
        usage.prompt += prompt if _count(prompt) else sum(len(m.get("content") or "") for m in messages) // 4
        usage.completion += completion if _count(completion) else len(content) // 4
        return _Reply(content, finish if isinstance(finish, str) else None)

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self._retry_max_s, self._retry_base_s * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # jitter spreads daemons that failed together

    def _excerpt(self, data: bytes) -> str:
        text = " ".join(data[:4096].decode("utf-8", "replace").split())
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text[:_EXCERPT] + ("..." if len(text) > _EXCERPT else "") if text else "(empty body)"


class LLMPlanner:
    """Planner over an OpenAI-compatible /chat/completions endpoint, with an optional fallback.

    `sleep`, `clock` and the retry delays default to production behaviour; tests pass their own.
    """

    def __init__(
        self,
        cfg: LLMConfig,
        api_key: str | None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        retry_base_s: float = 1.0,
        retry_max_s: float = 30.0,
    ) -> None:
        if cfg.base_url is None:
            raise ValueError("llm.base_url is not set: the offline rules planner handles that case")
        fb = cfg.fallback
        fb_key = fb.api_key.get_secret_value() if fb is not None and fb.api_key is not None else None
        secrets = [s for s in (api_key, fb_key) if s]

        def endpoint(base_url: str, model: str, key: str | None) -> _Endpoint:
            return _Endpoint(base_url, model, key, cfg, transport=transport, secrets=secrets, sleep=sleep,
                             retry_base_s=retry_base_s, retry_max_s=retry_max_s)

        self._cfg = cfg
        self._clock = clock
        self._primary = endpoint(cfg.base_url, cfg.model, api_key)
        self._fallback = endpoint(fb.base_url, fb.model, fb_key) if fb is not None else None
        self._primary_failures = 0
        self._benched_until = float("-inf")

    def __repr__(self) -> str:
        return f"LLMPlanner(endpoint={self.endpoint!r}, model={self._first().model!r})"

    @property
    def endpoint(self) -> str:
        """Base URL the next plan goes to first (no credentials)."""
        return self._first().url

    async def plan(self, request: PlanRequest) -> PlanResult:
        """Return a valid Plan or raise PlanInvalid / LLMUnavailable, all within cfg.timeout_s."""
        usage = TokenUsage()
        deadline = asyncio.get_running_loop().time() + self._cfg.timeout_s
        current = self._first()
        try:
            async with asyncio.timeout_at(deadline):
                try:
                    plan = await self._plan_on(current, request, usage, deadline)
                except LLMUnavailable as exc:
                    if current is not self._primary:
                        raise
                    self._primary_failed()
                    if self._fallback is None:
                        raise
                    log.warning("llm_fallback", endpoint=current.url, fallback=self._fallback.url,
                                reason=exc.reason)
                    current = self._fallback
                    try:
                        plan = await self._plan_on(current, request, usage, deadline)
                    except LLMUnavailable as fb_exc:
                        raise LLMUnavailable(f"{exc.reason}; fallback: {fb_exc.reason}") from None
                else:
                    if current is self._primary:
                        self._primary_failures = 0
        except TimeoutError:
            if current is self._primary:
                self._primary_failed()
            raise LLMUnavailable(
                f"deadline of {self._cfg.timeout_s:g}s exceeded waiting for {current.url}"
            ) from None
        return PlanResult(plan=plan, tokens=usage, endpoint=current.url)

    async def ping(self) -> bool:
        """True when GET {base_url}/models answers 2xx within a few seconds."""
        try:
            timeout = min(PING_TIMEOUT_S, self._cfg.request_timeout_s)
            resp = await self._primary.client.get("models", timeout=timeout)
        except httpx.HTTPError:
            return False
        return resp.is_success

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._primary.client.aclose()
        if self._fallback is not None:
            await self._fallback.client.aclose()

    async def _plan_on(
        self, endpoint: _Endpoint, request: PlanRequest, usage: TokenUsage, deadline: float
    ) -> Plan:
        messages = [dict(m) for m in request.messages]
        max_tokens = self._cfg.max_tokens
        repaired = continued = False
        while True:
            reply = await endpoint.complete(messages, max_tokens, usage, deadline)
            if reply.finish_reason == "length":
                # A cut-off reply may still parse into a plan that silently lost its tail: never use it.
                if continued:
                    raise PlanInvalid("reply cut off by the length limit")
                continued = True
                max_tokens = min(max_tokens * 2, 4 * self._cfg.max_tokens)
                messages = _with_nudge(messages, LENGTH_NUDGE)
                log.info("llm_reply_cut_off", endpoint=endpoint.url, max_tokens=max_tokens)
                continue
            try:
                return parse_plan(reply.content)
            except PlanInvalid as exc:
                if repaired:
                    raise PlanInvalid(f"invalid plan after a repair round: {exc.reason}") from None
                repaired = True
                log.info("llm_repair", endpoint=endpoint.url, reason=exc.reason)
                messages = [
                    *messages,
                    {"role": "assistant", "content": reply.content[:_REPAIR_ECHO_CHARS]},
                    {"role": "user", "content": repair_message(exc.reason)},
                ]

    def _first(self) -> _Endpoint:
        if self._fallback is not None and self._clock() < self._benched_until:
            return self._fallback
        return self._primary

    def _primary_failed(self) -> None:
        self._primary_failures += 1
        if self._fallback is not None and self._primary_failures >= BENCH_AFTER_FAILURES:
            self._benched_until = self._clock() + BENCH_FOR_S
            self._primary_failures = 0
            log.warning("llm_primary_benched", endpoint=self._primary.url, fallback=self._fallback.url,
                        seconds=BENCH_FOR_S)


def repair_message(reason: str) -> str:
    """The user message of the repair round."""
    return f"Your reply was not a valid plan: {reason.rstrip('. ')}. Reply with only the JSON object."


def _with_nudge(messages: list[dict[str, str]], nudge: str) -> list[dict[str, str]]:
    # Appended to the last user turn: some chat templates reject two user turns in a row.
    if messages and messages[-1].get("role") == "user":
        return [*messages[:-1], {**messages[-1], "content": f"{messages[-1]['content']}\n\n{nudge}"}]
    return [*messages, {"role": "user", "content": nudge}]


def _response_format(fmt: str) -> dict[str, Any]:
    if fmt == "json_schema":
        schema = {"name": "plan", "schema": plan_schema(), "strict": True}
        return {"type": "json_schema", "json_schema": schema}
    return {"type": "json_object"}


def _refuses_format(status: int, data: bytes) -> bool:
    """A server that does not take this response_format (any 400 while still negotiating)."""
    if status == 400:
        return True
    text = data[:_ERROR_BODY_BYTES].decode("utf-8", "replace").lower()
    return status == 422 and any(w in text for w in ("response_format", "json_schema", "schema"))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None if absent or garbled."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _text(content: Any) -> str:
    """Message content as text; some servers send a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(t for t in parts if isinstance(t, str))
    return ""


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
