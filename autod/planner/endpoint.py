"""One OpenAI-compatible server: HTTP with retries, negotiation, and care for a busy single-slot server.

What it learns about a server it keeps for the endpoint's life: the first response format the server
takes (a refusal moves on at once, no retries spent on it) and the token-limit parameter it takes
(`max_tokens`, or `max_completion_tokens` for OpenAI's reasoning models).

A request autod gives up on (a timeout, the plan's deadline, a stop) may still be running on the
server: llama-cpp-python generates a reply it was not asked to stream to the end after the client has
gone, so a retry would queue behind it. Every one-choice request is therefore asked as a stream
(`llm.stream`), which such servers stop at the next token once the client has closed it (so does a
streamed reply autod ends itself, autod.planner.earlystop). A request for several choices is not
streamed (their chunks interleave). Only one request is in flight per endpoint, and after one was
abandoned the next first waits for the server to answer a cheap probe (`GET /models`, which
llama-cpp-python serves only when the model is free) or, when it cannot be probed, `request_timeout_s`.

A suspect's greedy reply may be begun with its definition's head (`llm.prefill`): that request goes
to /completions, and the head is read as the reply's start (autod.planner.prefill).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx
import structlog

from autod import tally
from autod.backoff import Backoff
from autod.config.settings import LLMConfig
from autod.errors import ContextTooLong, LLMUnavailable, PlanInvalid
from autod.logs import redact_secrets, redact_text
from autod.planner import CHARS_PER_TOKEN, TokenUsage, busy, pace, prefill, wire
from autod.planner.earlystop import ReplyWatch, Watched
from autod.planner.exchange import MAX_REPLY_BYTES, Read, exchange, said, watched
from autod.planner.hold import Hold
from autod.planner.linechoice import Offer
from autod.planner.streamread import read_watched
from autod.planner.window import ServerWindow
from autod.safety import safejson, secretforms

log = structlog.get_logger("autod.planner.llm")

_ERROR_BODY_BYTES = 64 * 1024  # of an error response: enough for its message
_PROPS_BYTES = 1024 * 1024  # of GET /props: llama.cpp's is a few kB (its chat template the most of it)
_EXCERPT = 200

Sleep = Callable[[float], Awaitable[None]]
Record = Callable[[dict[str, Any]], None]


class Endpoint:
    """One server and what autod has learnt about it."""

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
        # uncompressed: the reply cap counts what was sent (no small body unpacks into gigabytes)
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.url = re.sub(r"//[^/@]*@", "//", base_url)  # never show userinfo credentials
        self.model = model
        self._cfg = cfg
        self._secrets = secrets
        self._sleep = sleep
        # jitter in the upper half of each step spreads daemons that failed together
        self._backoff = Backoff(retry_base_s, retry_max_s, (0.5, 1.0))
        # auto: the strictest format first; each refusal drops one for good
        self._formats = list(wire.FORMATS) if cfg.response_format == "auto" else _forced(cfg.response_format)
        self._token_param = "max_tokens" if cfg.token_param == "auto" else cfg.token_param
        self._inflight = asyncio.Lock()  # one request at a time to this server from this daemon
        self._abandoned_at: float | None = None  # loop time of a request given up while it may still run
        # What the server says of itself: its context window, its tokens' characters, `n` and `stop`.
        self.window = ServerWindow(self.url, self.key, cfg.context_tokens, self._ask_props)
        self.pace = pace.ServerPace(self.url, self.key)  # its reading against its writing, measured
        self.takes_n: bool | None = None
        self.takes_stop = True  # until the server refuses `stop` (then the code form goes without it)
        self.takes_stream_usage = True  # until it refuses `stream_options` (then counted by chunk)
        self.hold = Hold(self.url)  # how leg one is held to the definition's lines here, and if it is
        # until /completions is refused (autod.planner.prefill); auto: the server's tokenizer asked once
        self.takes_prefill = cfg.prefill != "none"
        self._chatml: bool | None = True if cfg.prefill == "chatml" else None
        self.client = httpx.AsyncClient(
            base_url=base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(cfg.request_timeout_s, connect=min(10.0, cfg.request_timeout_s)),
            transport=transport,
            follow_redirects=False,
        )

    @property
    def holds_lines(self) -> bool:
        """Leg one's answer is held to the definition's lines here, as far as seen (autod.planner.hold)."""
        return self.hold.held

    @property
    def busy(self) -> bool:
        """A request of autod's is in flight to this server."""
        return self._inflight.locked()

    async def complete(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        usage: TokenUsage,
        deadline: float,
        paths: tuple[str, ...] | None = None,
        temperature: float | None = None,
        *,
        symbols: Mapping[str, Sequence[str]] | None = None,
        seed: int | None = None,
        n: int = 1,
        record: Record | None = None,
        free: bool = False,
        stop: Sequence[str] = (),
        watch: Watched | None = None,
        opening: str = "",
        held: Offer | None = None,
    ) -> wire.Completion:
        """One chat completion (with retries). Raises LLMUnavailable, ContextTooLong, or PlanInvalid.

        `paths` and `symbols` go into the schema (formats that carry no schema ignore them);
        `temperature` overrides llm.temperature for this request; `seed` and `n` (choices wanted) are
        sent as given. `record` receives each exchange (for the cycle's transcript). `free`: no
        response_format at all (a reply in the code form), whatever format the server takes; `stop`:
        stop sequences; `watch`: the definition a one-choice reply rewrites, streamed and ended as soon
        as the rest cannot change the fix (autod.planner.earlystop); `opening`: the answer's start, given
        to the model where the server takes it (`llm.prefill`), and part of the reply read either way;
        `held`: the lines a begun reply (/completions) is held to, sent in each spelling the server may
        take until it refuses them (autod.planner.hold).
        """
        heat = self._cfg.temperature if temperature is None else temperature
        switched_param = False
        i = 0
        while True:
            fmt = "none" if free else self._formats[i]
            choices = n if self.takes_n is not False else 1
            body = wire.request_body(self.model, messages, temperature=heat,
                                     max_tokens=max_tokens, token_param=self._token_param, fmt=fmt,
                                     paths=paths, symbols=symbols, seed=seed, n=choices,
                                     stop=stop if self.takes_stop else (),
                                     stream=watch is not None or (self._cfg.stream and choices == 1),
                                     stream_usage=self.takes_stream_usage)
            rendered = (prefill.chatml(messages, opening)
                        if opening and free and choices == 1 and self.takes_prefill else None)
            if rendered is not None:
                body = prefill.completions_body(body, rendered)
                if held is not None:
                    self.hold.put(body, held.grammar, held.lines)
            if await asyncio.to_thread(_holds_secret, body):  # the last line of defence, at the wire
                log.error("llm.secret_withheld", endpoint=self.url, completions=rendered is not None)
                raise PlanInvalid("the request would have carried a configured secret; not sent")
            started = asyncio.get_running_loop().time()
            given = opening if rendered is not None else ""
            status, ctype, data, read = await self._send(body, deadline, fmt, watch, given)
            tally.spend("model", (asyncio.get_running_loop().time() - started) * 1000)
            if record is not None:  # the reply as written, redacted off the loop (megabytes: seconds)
                await asyncio.to_thread(record, exchange(self.url, body, status, said(ctype, data, read),
                                                         started, messages, given))
            if 200 <= status < 300:
                if not free:
                    self._formats = self._formats[i:]  # the refused ones are never sent again
                reply = self._read(ctype, data, messages, usage, read, given)
                await self.window.keep_ratio()
                await self.pace.keep()
                if body.get("n", 1) > 1:
                    self.takes_n = len(reply.others) + 1 >= body["n"]
                return reply
            if wire.is_context_overflow(status, data):
                limit, prompt = wire.context_numbers(data)
                self.window.measure(messages, prompt)
                if limit:
                    await self.window.learn(limit, "a context error")  # budget to it from now on
                raise ContextTooLong(
                    f"the prompt does not fit the model's context at {self.url} (HTTP {status}: "
                    f"{self._excerpt(data)}); raise the server's context size or lower llm.max_tokens",
                    limit=limit, prompt_tokens=prompt, reply_tokens=max_tokens,
                )
            if (not switched_param and self._cfg.token_param == "auto"
                    and wire.refuses_token_param(status, data, self._token_param)):
                other = next(p for p in wire.TOKEN_PARAMS if p != self._token_param)
                log.warning("llm.token_param_switched", endpoint=self.url, status=status,
                            refused=self._token_param, now=other)
                self._token_param, switched_param = other, True
                continue
            if body.get("stream_options") and wire.refuses_param(status, data, "stream_options"):
                log.warning("llm.stream_options_refused", endpoint=self.url, status=status)
                self.takes_stream_usage = False
                continue
            if self.hold.sent(body) and self.hold.refused(status, data):  # asked again without them
                log.warning("llm.grammar_refused", endpoint=self.url, status=status,
                            error=self._excerpt(data))
                continue
            if given and status in (400, 404, 405, 422, 501):  # no /completions, or not this body
                log.warning("llm.prefill_refused", endpoint=self.url, status=status,
                            error=self._excerpt(data))
                self.takes_prefill = False
                continue
            if body.get("stop") and wire.refuses_stop(status, data):
                log.warning("llm.stop_refused", endpoint=self.url, status=status)
                self.takes_stop = False  # the copied-prompt blocks are still dropped as quotes
                continue
            untried = [] if free else self._formats[i + 1 :]
            if untried and wire.refuses_format(status, data):
                log.warning("llm.response_format_refused", endpoint=self.url, status=status,
                            response_format=fmt, next_format=untried[0])
                i += 1
                continue
            path = "completions" if given else "chat/completions"
            raise LLMUnavailable(f"HTTP {status} from {self.url}/{path}: {self._excerpt(data)}")

    async def _send(
        self, body: dict[str, Any], deadline: float, fmt: str, watch: Watched | None = None, opening: str = ""
    ) -> tuple[int, str, bytes, Read | None]:
        """POST with retries for 408/429/5xx, connect errors and timeouts. Returns (status, type, body,
        what a watch read of it)."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            attempt += 1
            started = loop.time()
            retry_after: float | None = None
            try:
                status, headers, data, read = await self._post(body, deadline, watch, opening)
            except httpx.TimeoutException:
                failure, status = "request timed out", None
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                failure, status = f"{type(exc).__name__}: {self._excerpt(str(exc).encode())}", None
            except httpx.HTTPError as exc:
                raise LLMUnavailable(f"{self.url}: {type(exc).__name__}") from None
            else:
                log.debug("llm.request", endpoint=self.url, attempt=attempt, status=status,
                          response_format=fmt, bytes=len(data),
                          duration_ms=round((loop.time() - started) * 1000))
                # A refusal or an overflow answers the same to every retry: hand it back at once.
                if (not wire.retryable(status) or wire.refuses_format(status, data)
                        or wire.is_context_overflow(status, data)):
                    return status, headers.get("content-type", ""), data, read
                failure = f"HTTP {status}"
                if status in (429, 503):
                    retry_after = wire.retry_after(headers.get("retry-after"))
            if status is None:
                log.debug("llm.request", endpoint=self.url, attempt=attempt, error=failure,
                          duration_ms=round((loop.time() - started) * 1000))
            if attempt > self._cfg.max_retries:
                raise LLMUnavailable(f"{failure} from {self.url} after {attempt} attempts")
            delay = retry_after if retry_after is not None else self._backoff.delay(attempt - 1)
            if loop.time() + delay >= deadline:
                # Sleeping into the deadline gains nothing; failing now leaves time for the fallback.
                raise LLMUnavailable(
                    f"{failure} from {self.url}; a retry in {delay:.1f}s would pass the deadline"
                )
            log.warning("llm.retry", endpoint=self.url, attempt=attempt, status=status, error=failure,
                        delay_s=round(delay, 2))
            await self._sleep(delay)

    async def _post(
        self, body: dict[str, Any], deadline: float, watch: Watched | None, opening: str
    ) -> tuple[int, httpx.Headers, bytes, Read | None]:
        async with self._inflight:
            await self._wait_for_abandoned(deadline)
            loop = asyncio.get_running_loop()
            # Marked before sending: a timeout, a cancel or a stop leaves it set, so the next request
            # first makes sure the server is done with this one.
            self._abandoned_at = loop.time()
            path = "completions" if "prompt" in body else "chat/completions"
            new_chars, sent_at = self.pace.sent(pace.prompt_text(body)), loop.time()
            async with self.client.stream("POST", path, json=body) as resp:
                ok = resp.is_success
                cap = MAX_REPLY_BYTES if ok else _ERROR_BODY_BYTES
                declared = resp.headers.get("content-length", "")
                if ok and declared.isdigit() and int(declared) > cap:
                    raise PlanInvalid("reply too large")
                if ok and body.get("stream"):  # each attempt reads afresh
                    reading = ReplyWatch(watch) if watch is not None else None
                    if reading is not None and opening:
                        reading.feed(opening)  # the reply's start, as if the model had written it
                    data, count, first, written = await read_watched(resp, reading, cap)
                    self._abandoned_at = None
                    if first is not None:  # the prompt's new part read, then the reply written
                        read_s, write_s = first - sent_at, loop.time() - first
                        self.pace.observe(new_chars, read_s, written, write_s)
                        log.debug("llm.pace", endpoint=self.url, read_chars=new_chars, written_chars=written,
                                  read_s=round(read_s, 3), write_s=round(write_s, 3), **self.pace.as_dict())
                    return resp.status_code, resp.headers, data, (reading, count)
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > cap:
                        if ok:
                            raise PlanInvalid("reply too large")
                        break  # an error body: its start is all we show
                    chunks.append(chunk)
            self._abandoned_at = None
            return resp.status_code, resp.headers, b"".join(chunks), None

    async def _wait_for_abandoned(self, deadline: float) -> None:
        """After a request autod gave up on, wait until the server is done with it (autod.planner.busy)."""
        if self._abandoned_at is not None:
            await busy.await_free(self.client, self.url, self._abandoned_at, self._cfg.request_timeout_s,
                                  deadline, self._sleep)
            self._abandoned_at = None

    async def prefills(self) -> bool:
        """Whether a greedy reply may be begun with its definition's head here (`llm.prefill`)."""
        if self.takes_prefill and self._chatml is None:
            timeout = min(busy.PROBE_MIN_S, self._cfg.request_timeout_s)
            self._chatml = await prefill.speaks_chatml(self.client, self._root, self.model, timeout)
            if self._chatml is not None:  # None: too busy to say, asked again next time
                log.info("llm.prefill_chosen", endpoint=self.url, chatml=self._chatml)
                self.takes_prefill = self._chatml
        return self.takes_prefill and bool(self._chatml)

    @property
    def _root(self) -> str:
        """The server's root, beside /v1 (where llama.cpp's /props and the tokenizers are)."""
        return re.sub(r"/v1/?$", "", str(self.client.base_url).rstrip("/"))

    @property
    def key(self) -> str:
        """What a learnt window is kept under: the server and the model."""
        return f"{self.url}|{self.model}"

    async def _ask_props(self) -> int | None:
        """llama.cpp's server states `n_ctx` at GET /props (at the server's root, beside /v1)."""
        for url in (f"{self._root}/props", "props"):
            wait = min(busy.PROBE_MIN_S, self._cfg.request_timeout_s)
            try:
                async with self.client.stream("GET", url, timeout=wait) as resp:
                    data = await prefill.read_capped(resp, _PROPS_BYTES, wait) if resp.is_success else None
            except httpx.HTTPError:
                continue
            if data is not None:
                try:
                    found = wire.context_size(safejson.loads(data))
                except ValueError:
                    found = None
                if found:
                    return found
        return None

    def _read(
        self, ctype: str, data: bytes, messages: list[dict[str, str]], usage: TokenUsage,
        read: Read | None = None, opening: str = "",
    ) -> wire.Completion:
        try:
            reply = wire.read_completion(ctype, data)
        except wire.BadReply as exc:
            # the server's answer is not a chat completion at all: the server's fault, not the model's
            raise LLMUnavailable(f"{exc} from {self.url}: {self._excerpt(data)}") from None
        reply.content = opening + reply.content  # a watch that ended the reply holds the opening too
        if read is not None:
            reply = watched(reply, *read, url=self.url)
        elif wire.is_sse(ctype, data):
            log.debug("llm.reply_streamed", endpoint=self.url, bytes=len(data))
        # A server that omits usage (a streamed reply mostly) still spends tokens: estimate them by the
        # characters a token held in the prompts it counted (before any was: code's dense ~3, so the
        # daily budget is not undercounted)
        prompt_chars = self.window.measure(messages, reply.prompt_tokens)
        per_token = self.window.chars_per_token or CHARS_PER_TOKEN
        counted = reply.prompt_tokens
        usage.prompt += counted if counted is not None else int(prompt_chars / per_token)
        usage.completion += (reply.completion_tokens if reply.completion_tokens is not None
                             else len(reply.content) // 4)
        return reply

    def _excerpt(self, data: bytes) -> str:  # redacted whole (a secret in any form, or cut off), then cut
        text, own = redact_text(data.decode("utf-8", "replace")), secretforms.pattern(self._secrets)
        text = " ".join(secretforms.cut_tail(own.sub("***", text) if own else text, self._secrets)[:4096]
                        .split())
        return text[:_EXCERPT] + ("..." if len(text) > _EXCERPT else "") if text else "(empty body)"


def _holds_secret(body: dict[str, Any]) -> bool:
    """Whether a request body holds a configured secret (autod.logs: every form of each value)."""
    text = json.dumps(body, ensure_ascii=False)
    return redact_secrets(text) != text


def _forced(fmt: str) -> list[str]:
    # json_object carries the schema where the server takes it, and drops it where it is refused
    return ["json_object+schema", "json_object"] if fmt == "json_object" else [fmt]
