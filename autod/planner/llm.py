"""The LLM planner: asks an OpenAI-compatible server for a plan and returns it validated.

One plan() call may make several requests, all inside one deadline (cfg.timeout_s): one repair
round for an invalid reply, one nudge for a reply cut off by the token cap (at the same cap: a tiny
model given twice the tokens runs for minutes), one smaller reply cap when the prompt and the reply
do not fit the model's context together, and the fallback endpoint when the primary is unavailable.
The HTTP side (retries, negotiation, a busy server) is `endpoint.Endpoint`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

import httpx
import structlog

from autod.config.settings import LLMConfig
from autod.errors import ContextTooLong, CycleError, LLMUnavailable, PlanInvalid
from autod.plan import Plan
from autod.planner import (
    TEMPLATE_TOKENS,
    PlanRequest,
    PlanResult,
    TokenUsage,
    estimated_tokens,
    point,
    prefill,
    prompt_chars,
    splice,
)
from autod.planner.codeform import parse_code_reply, quoted_code
from autod.planner.endpoint import MAX_REPLY_BYTES, Endpoint, Sleep
from autod.planner.forms import FORMS
from autod.planner.pace import PaceMemory
from autod.planner.parse import parse_plan
from autod.planner.window import WindowMemory
from autod.planner.wire import Completion

__all__ = ["MAX_REPLY_BYTES", "LLMPlanner"]

log = structlog.get_logger(__name__)
# A prompt the server did not count is taken at this many characters a token (more than code or
# English prose hold in the tokenizers autod meets, ~3-4.2): a window learnt from it is smaller than
# the server's, so a prompt fitted to it is not cut again.
UNCOUNTED_CHARS_PER_TOKEN = 4.5

_REPAIR_ECHO_CHARS = 64_000  # the invalid reply sent back in the repair round, at most
PING_TIMEOUT_S = 5.0
BENCH_AFTER_FAILURES = 3  # consecutive unavailable plans on the primary ...
BENCH_FOR_S = 300.0  # ... send plans straight to the fallback for this long
MIN_REPLY_TOKENS = 256  # a reply cap lowered to fit the context is not worth asking below this
DEFAULT_MODE_TOKENS = 2000  # reply cap of a mode missing from llm.max_tokens_by_mode
# more characters than any token of a real vocabulary holds (the longest are runs of one character:
# spaces, "=" or "-" rules): a reply longer than its cap times this was not written by the model
MAX_CHARS_PER_TOKEN = 64
# and never more than this, whatever llm.max_tokens says (it may be 200,000): a bound on what one parse
# holds the GIL for may not be an operator's setting. A fix's reply is a definition or a few edits.
MAX_REPLY_CHARS = 256 * 1024


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

        def endpoint(base_url: str, model: str, key: str | None) -> Endpoint:
            return Endpoint(base_url, model, key, cfg, transport=transport, secrets=secrets, sleep=sleep,
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
        """Return a valid Plan or raise PlanInvalid / LLMUnavailable / ContextTooLong, within cfg.timeout_s.

        An error carries the tokens spent before it (`CycleError.tokens`): they count all the same.
        """
        usage = TokenUsage()
        try:
            return await self._plan(request, usage)
        except CycleError as exc:
            exc.tokens = {"prompt": usage.prompt, "completion": usage.completion}
            raise

    async def _plan(self, request: PlanRequest, usage: TokenUsage) -> PlanResult:
        deadline = asyncio.get_running_loop().time() + self._cfg.timeout_s
        current = self._first()
        try:
            async with asyncio.timeout_at(deadline):
                try:
                    result = await self._plan_on(current, request, usage, deadline)
                except LLMUnavailable as exc:
                    if current is not self._primary:
                        raise
                    self._primary_failed()
                    if self._fallback is None:
                        raise
                    log.warning("llm.fallback", endpoint=current.url, fallback=self._fallback.url,
                                reason=exc.reason)
                    current = self._fallback
                    try:
                        result = await self._plan_on(current, request, usage, deadline)
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
        result.tokens, result.endpoint = usage, current.url
        return result

    def remember_windows(self, memory: WindowMemory) -> None:
        """Keep the windows learnt of both endpoints in `memory`, and recall them from it."""
        for endpoint in (self._primary, self._fallback):
            if endpoint is not None:
                endpoint.window.memory = memory

    def remember_pace(self, memory: PaceMemory) -> None:
        """Keep the reading and writing speeds measured of both endpoints in `memory`, and start from
        what it holds."""
        for endpoint in (self._primary, self._fallback):
            if endpoint is not None:
                endpoint.pace.memory = memory

    async def context_window(self) -> int | None:
        """Tokens the server's context holds (prompt and reply), when known; asks the server once.
        What an earlier run kept of the server is recalled here, before the first prompt is sized and
        the first plan priced: its window, and its pace (autod.planner.pace)."""
        endpoint = self._first()
        await endpoint.pace.recall()
        return await endpoint.window.size()

    @property
    def read_per_generated(self) -> float | None:
        """A prompt token's time in reply tokens' time on the server asked now, measured on its streamed
        replies (autod.planner.pace); None until it is."""
        return self._first().pace.read_per_generated()

    @property
    def holds_lines(self) -> bool:
        """A long suspect's leg one cannot miss on the server asked now (autod.planner.linechoice)."""
        return self._first().holds_lines

    @property
    def write_seconds(self) -> float | None:
        """Seconds a reply token takes on the server asked now, measured on its streamed replies
        (autod.planner.pace); None until it is."""
        speeds = self._first().pace.speeds()
        return None if speeds is None else speeds.write_s

    @property
    def chars_per_token(self) -> float | None:
        """Characters a token of this server held in the prompts it counted (None: not yet seen)."""
        return self._first().window.chars_per_token

    async def ping(self) -> bool:
        """True when GET {base_url}/models answers 2xx within a few seconds.

        Also true when it connects but does not answer while autod's own request is running there:
        a single-slot server (llama-cpp-python) answers /models only between generations.
        """
        try:
            timeout = min(PING_TIMEOUT_S, self._cfg.request_timeout_s)
            resp = await self._primary.client.get("models", timeout=timeout)
        except httpx.ReadTimeout:
            return self._primary.busy
        except httpx.HTTPError:
            return False
        return resp.is_success

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._primary.client.aclose()
        if self._fallback is not None:
            await self._fallback.client.aclose()

    async def _plan_on(
        self, endpoint: Endpoint, request: PlanRequest, usage: TokenUsage, deadline: float
    ) -> PlanResult:
        messages = [dict(m) for m in request.messages]
        max_tokens = _fitted_cap(endpoint, messages, self.reply_tokens(request.mode))
        code = request.form == "code"

        shown = await asyncio.to_thread(quoted_code, request.messages) if code else frozenset()  # parses
        watch = request.watch if code and request.n == 1 and self._cfg.stop_early else None
        # the greedy draw's reply starts with the definition's head where the server takes it
        opening, named = "", ""
        if code and request.n == 1 and request.watch is not None and await endpoint.prefills():
            head = await asyncio.to_thread(prefill.opening, request.watch.code)  # a parse: off the loop
            pointed = None
            if head and watch is not None:  # a long one: which line first (autod.planner.point)
                pointed = await point.legs(endpoint, messages, usage, deadline, watch, head,
                                           min(self._cfg.point_lines, request.point_lines),
                                           temperature=request.temperature, above=self._cfg.point_above,
                                           seed=request.seed, record=request.record)
            if pointed is not None:
                messages, opening, watch, named = pointed
            elif request.temperature == 0:
                opening = head
            elif watch is not None and prefill.chatml(messages, "") is not None:  # the watch ends leg one
                # a sampled reply: given its docstring once it has written its signature unchanged
                span = await asyncio.to_thread(splice.docstring_lines, watch.code)
                if span is not None:
                    watch, opening = dataclasses.replace(watch, splice=span), splice.first_leg(watch.code)

        def read(content: str) -> Plan:
            if not code:
                return parse_plan(content)
            return parse_code_reply(content, request.symbols, request.paths, quoted=shown)

        repaired = continued = refitted = False
        while True:
            try:
                paths = request.paths if self._cfg.constrain_paths else None
                symbols = request.symbols if self._cfg.constrain_paths else None
                reply = await endpoint.complete(
                    messages, max_tokens, usage, deadline, paths, request.temperature,
                    symbols=symbols, seed=request.seed, n=request.n, record=request.record, free=code,
                    stop=request.stop, watch=watch, opening="" if repaired or continued else opening,
                )
            except ContextTooLong as exc:
                room = _reply_room(exc)
                if refitted or room is None or room >= max_tokens:
                    log.warning("llm.context_too_long", endpoint=endpoint.url, limit=exc.limit,
                                prompt_tokens=exc.prompt_tokens, max_tokens=max_tokens)
                    raise
                # The prompt fits, the reply cap does not: ask again with what is left of the window.
                refitted, max_tokens = True, room
                log.info("llm.reply_cap_lowered", endpoint=endpoint.url, limit=exc.limit, max_tokens=room)
                continue
            _within_cap(reply, max_tokens)
            if reply.stopped_early == "paused":  # the signature written unchanged: the docstring given
                opening, watch = reply.content, request.watch
                log.info("llm.docstring_given", endpoint=endpoint.url, tokens=reply.completion_tokens)
                continue
            if reply.others:  # several choices: each stands or falls alone (no repair round)
                return await asyncio.to_thread(_choices, reply, max_tokens, read)  # parsing: off the loop
            prompt = _cut_by_context(reply, max_tokens, messages) if reply.finish_reason == "length" else None
            if prompt is not None:
                # Cut well before autod's own cap: the server's context is full (llama-cpp-python
                # shortens the reply silently and states its window nowhere). Its size is what this
                # request used; the cycle fits the prompt to it and asks again.
                window = prompt + (reply.completion_tokens or 0)
                counted = "" if reply.prompt_tokens else " (prompt estimated)"
                await endpoint.window.learn(window, f"a reply cut before the token cap{counted}")
                raise ContextTooLong(
                    f"the reply was cut at {reply.completion_tokens} tokens by the server's context of"
                    f" {window} tokens at {endpoint.url}",
                    limit=window, prompt_tokens=prompt, reply_tokens=max_tokens,
                )
            if reply.finish_reason == "length":
                # A cut-off reply may still parse into a plan that silently lost its tail: never use it.
                if continued:
                    raise PlanInvalid(f"reply cut off by the length limit ({max_tokens} tokens) twice")
                continued = True
                messages = _with_nudge(messages, FORMS[request.form].length_nudge)
                log.info("llm.reply_cut_off", endpoint=endpoint.url, max_tokens=max_tokens)
                continue
            try:
                return PlanResult(await asyncio.to_thread(read, reply.content), ended=reply.stopped_early,
                                  named=named)
            except PlanInvalid as exc:
                if repaired:
                    raise PlanInvalid(f"invalid plan after a repair round: {exc.reason}") from None
                repaired = True
                log.info("llm.repair", endpoint=endpoint.url, reason=exc.reason)
                messages = [
                    *messages,
                    {"role": "assistant", "content": reply.content[:_REPAIR_ECHO_CHARS]},
                    {"role": "user", "content": FORMS[request.form].repair_message(exc.reason)},
                ]

    def reply_tokens(self, mode: str) -> int:
        """The reply token cap for a mode: llm.max_tokens when set, else the mode's own."""
        if self._cfg.max_tokens is not None:
            return self._cfg.max_tokens
        return self._cfg.max_tokens_by_mode.get(mode, DEFAULT_MODE_TOKENS)

    def _first(self) -> Endpoint:
        if self._fallback is not None and self._clock() < self._benched_until:
            return self._fallback
        return self._primary

    def _primary_failed(self) -> None:
        self._primary_failures += 1
        if self._fallback is not None and self._primary_failures >= BENCH_AFTER_FAILURES:
            self._benched_until = self._clock() + BENCH_FOR_S
            self._primary_failures = 0
            log.warning("llm.primary_benched", endpoint=self._primary.url, fallback=self._fallback.url,
                        seconds=BENCH_FOR_S)


def _with_nudge(messages: list[dict[str, str]], nudge: str) -> list[dict[str, str]]:
    # Appended to the last user turn: some chat templates reject two user turns in a row.
    if messages and messages[-1].get("role") == "user":
        return [*messages[:-1], {**messages[-1], "content": f"{messages[-1]['content']}\n\n{nudge}"}]
    return [*messages, {"role": "user", "content": nudge}]


def _fitted_cap(endpoint: Endpoint, messages: list[dict[str, str]], cap: int) -> int:
    """The reply cap, lowered before sending when the server's window is known and the prompt (which
    the cycle cut as far as it could) leaves less than it: the server would refuse the request or cut
    the reply, and either costs a round trip (a whole prompt's evaluation, on llama-cpp-python)."""
    window = endpoint.window.tokens
    if not window:
        return cap
    prompt = int(estimated_tokens(messages, endpoint.window.chars_per_token)) + TEMPLATE_TOKENS
    room = window - prompt
    if room >= cap or room < MIN_REPLY_TOKENS:
        return cap  # it fits; or too little is left to be worth it, and the server will say so
    log.info("llm.reply_cap_fitted", endpoint=endpoint.url, context_tokens=window, prompt_tokens=prompt,
             max_tokens=room)
    return room


def _reply_room(exc: ContextTooLong) -> int | None:
    """Tokens left for the reply beside the prompt, when the server said both numbers and it is worth it."""
    if not exc.limit or not exc.prompt_tokens:
        return None
    room = exc.limit - exc.prompt_tokens - 32  # chat-template tokens the count may leave out
    return room if room >= MIN_REPLY_TOKENS else None


def _within_cap(reply: Completion, max_tokens: int) -> None:
    """PlanInvalid for a reply longer than `max_tokens` tokens can write. Reading its code is one
    `ast.parse`, which holds the GIL for the whole call: 2.7 MB of one-token lines from a server held it
    for 5 s, so `autod status` waited and the cycle missed its deadline."""
    limit = min(max_tokens * MAX_CHARS_PER_TOKEN, MAX_REPLY_CHARS)
    longest = max(len(c.content) for c in [reply, *reply.others])
    if longest > limit:
        raise PlanInvalid(f"the reply holds {longest} characters, more than {max_tokens} tokens can write"
                          f" ({MAX_CHARS_PER_TOKEN} a token) or autod reads ({MAX_REPLY_CHARS}): not read")


def _choices(reply: Completion, max_tokens: int, read: Callable[[str], Plan]) -> PlanResult:
    """A reply with several choices: the valid plans, and why the others were dropped."""
    plans: list[Plan] = []
    invalid: list[str] = []
    for choice in [reply, *reply.others]:
        if choice.finish_reason == "length":
            invalid.append(f"cut off by the length limit ({max_tokens} tokens)")
            continue
        try:
            plans.append(read(choice.content))
        except PlanInvalid as exc:
            invalid.append(exc.reason)
    if not plans:
        raise PlanInvalid(f"none of {len(invalid)} choices was a valid plan: {invalid[0]}")
    return PlanResult(plans[0], alternatives=plans[1:], invalid=invalid)


def _cut_by_context(reply: Completion, max_tokens: int, messages: list[dict[str, str]]) -> int | None:
    """For a reply stopped for length with (counted) tokens well under the cap autod asked for: its
    prompt's tokens, as the server counted them or, uncounted (llama-cpp-python's streams carry no
    usage; their chunks count the reply), at `UNCOUNTED_CHARS_PER_TOKEN`. None: not such a reply."""
    done = reply.completion_tokens
    if done is None or done >= max_tokens * 0.9:
        return None
    if reply.prompt_tokens is not None:
        return reply.prompt_tokens
    return int(prompt_chars(messages) / UNCOUNTED_CHARS_PER_TOKEN)
