"""What goes over the wire to an OpenAI-compatible server and what comes back, as pure functions.

Request bodies (the response_format variants, the token-limit parameter), reading a reply (one JSON
document, or SSE chunks from a server that streams although asked not to), and telling apart the
errors a real server answers: a refused response format, a refused token parameter, a prompt too
long for the model's context. Nothing here does I/O, so every server quirk has a unit test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from autod.linebreaks import byte_lines, lines_of
from autod.plan import plan_schema
from autod.safety import safejson

# The response formats, strictest first. "json_object+schema" is llama-cpp-python's and llama.cpp's
# way to take a schema in JSON mode (they turn it into a grammar); vLLM and Ollama ignore the extra
# key, and a server that refuses it gets plain json_object next.
FORMATS = ("json_schema", "json_object+schema", "json_object", "none")
TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")

# Words an error body uses when the server does not take a response format.
_FORMAT_WORDS = ("response_format", "json_schema", "grammar", "schema")
# ... and when the prompt does not fit the model's context (OpenAI, vLLM, llama.cpp, llama-cpp-python,
# Ollama, Anthropic-style proxies). Checked before the other two: vLLM's context error names
# max_completion_tokens too.
_CONTEXT_WORDS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "context size",
    "exceed_context_size",
    "n_ctx",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "reduce the length of the messages",
)
_REFUSAL_STATUSES = (400, 413, 422, 500)
# ... and when it does not take a parameter (OpenAI: "Unsupported parameter: 'max_tokens' is not
# supported with this model. Use 'max_completion_tokens' instead."; pydantic: "Extra inputs ...").
_REFUSED_WORDS = ("unsupported", "not supported", "unrecognized", "unknown", "extra inputs", "not permitted")
_ERROR_SCAN_BYTES = 16 * 1024
# possessive runs, and a number read from its first digit only: a run of blanks or digits is not
# scanned again from each of its characters (an error body is the server's, untrusted)
_LIMIT = re.compile(
    r"(?:maximum context length is|context window of|context length of|context size(?: is)?"
    r"|n_ctx\W++)\s*+(\d+)",
    re.IGNORECASE,
)
_PROMPT = re.compile(
    r"(?<!\d)(\d++) in the messages|request has (\d+) input tokens|n_prompt_tokens\W++(\d+)"
    r"|requested tokens \((\d+)\)|prompt is too long: (\d+)",
    re.IGNORECASE,
)


def request_body(
    model: str,
    messages: list[dict[str, str]],
    *,
    temperature: float,
    max_tokens: int,
    token_param: str,
    fmt: str,
    paths: Sequence[str] | None = None,
    symbols: Mapping[str, Sequence[str]] | None = None,
    seed: int | None = None,
    n: int = 1,
    stop: Sequence[str] = (),
    stream: bool = False,
    stream_usage: bool = True,
) -> dict[str, Any]:
    """One /chat/completions body. `stream`: sent as server-sent events, read as they come so a watch
    may end the reply (autod.planner.earlystop); otherwise one reply, read whole. A stream asks for its
    token counts (`stream_options.include_usage`: OpenAI, vLLM, Ollama) unless `stream_usage` is off.

    `seed` makes a sampled reply reproducible where the server takes it (llama.cpp, vLLM, OpenAI);
    `n` > 1 asks for that many choices of the same prompt (a server that ignores it sends one).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        token_param: max_tokens,
        "stream": stream,
    }
    if stream and stream_usage:
        body["stream_options"] = {"include_usage": True}
    if seed is not None:
        body["seed"] = seed
    if n > 1:
        body["n"] = n
    if stop:
        body["stop"] = list(stop)[:4]  # OpenAI takes at most four
    if fmt != "none":
        body["response_format"] = response_format(fmt, paths, symbols)
    return body


def response_format(
    fmt: str, paths: Sequence[str] | None = None, symbols: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """The response_format object for one of FORMATS (but "none"); `paths` limit `edits[].path` and
    `symbols` each file's definitions (autod.plan.plan_schema)."""
    if fmt == "json_schema":
        schema = {"name": "plan", "schema": plan_schema(paths, symbols), "strict": True}
        return {"type": "json_schema", "json_schema": schema}
    if fmt == "json_object+schema":
        return {"type": "json_object", "schema": plan_schema(paths, symbols)}
    return {"type": "json_object"}


# -- replies ---------------------------------------------------------------------------


@dataclass
class Completion:
    """What autod keeps of a chat completion: the text, why it stopped, and the usage if counted.

    `others` are the further choices of a request that asked for several (`n`), in order."""

    content: str
    finish_reason: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    others: list[Completion] = field(default_factory=list)
    stopped_early: str = ""  # why autod ended a watched reply ("echo", "changed", "closed"), if it did


class BadReply(ValueError):
    """The body is not a chat completion (the message is a short reason, without the body)."""


def is_sse(content_type: str, data: bytes) -> bool:
    """A server-sent-events body: by its content type, or by its first line (some servers mislabel it)."""
    if content_type.split(";")[0].strip().lower() == "text/event-stream":
        return True
    for line in byte_lines(data[:4096]):
        line = line.strip()
        if line and not line.startswith(b":"):  # blank lines and ": comments" may come first
            return line.startswith((b"data:", b"event:", b"id:"))
    return False


def read_completion(content_type: str, data: bytes) -> Completion:
    """Parse a 2xx body, JSON or SSE. Raises BadReply."""
    if is_sse(content_type, data):
        return _read_sse(data)
    try:
        doc = safejson.loads(data)
    except ValueError:
        raise BadReply("the reply body is not JSON") from None
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadReply("the reply has no choices")
    prompt, completion = _usage(doc.get("usage"))
    read = [_choice(c) for c in choices[:64] if isinstance(c, dict)]
    first = read[0]
    return Completion(first[0], first[1], prompt, completion, [Completion(t, f) for t, f in read[1:]])


def _choice(choice: dict[str, Any]) -> tuple[str, str | None]:
    message = choice.get("message")
    # a /completions choice (autod.planner.prefill) carries its text bare
    content = text_of(message.get("content") if isinstance(message, dict) else choice.get("text"))
    finish = choice.get("finish_reason")
    return content, finish if isinstance(finish, str) else None


def _read_sse(data: bytes) -> Completion:
    """Assemble `data: {chunk}` lines: content deltas in order, the last finish_reason, any usage."""
    parts: list[str] = []
    finish: str | None = None
    prompt = completion = None
    chunks = 0
    for raw_line in lines_of(data.decode("utf-8", "replace")):
        line = raw_line.strip()
        if not line.startswith("data:"):
            continue  # event:, id:, retry:, ": keep-alive" comments, blank separators
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            chunk = safejson.loads(payload)
        except ValueError:
            raise BadReply("an SSE chunk of the reply is not JSON") from None
        if not isinstance(chunk, dict):
            raise BadReply("an SSE chunk of the reply is not a JSON object")
        if isinstance(chunk.get("error"), dict | str):
            raise BadReply(f"the server streamed an error: {_error_text(chunk)[:200]}")
        chunks += 1
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else choice.get("message")
            if isinstance(delta, dict):
                parts.append(text_of(delta.get("content")))
            elif isinstance(choice.get("text"), str):  # a /completions chunk
                parts.append(choice["text"])
            if isinstance(choice.get("finish_reason"), str):
                finish = choice["finish_reason"]
        p, c = _usage(chunk.get("usage"))  # OpenAI sends it in a last chunk with empty choices
        prompt, completion = (p, c) if p is not None or c is not None else (prompt, completion)
    if chunks == 0:
        raise BadReply("the SSE reply carries no chunks")
    return Completion("".join(parts), finish, prompt, completion)


def text_of(content: Any) -> str:
    """Message content as text; some servers send a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(t for t in parts if isinstance(t, str))
    return ""


def _usage(usage: Any) -> tuple[int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None
    return safejson.count(usage.get("prompt_tokens")), safejson.count(usage.get("completion_tokens"))


# -- errors ----------------------------------------------------------------------------


def _error_text(data: bytes | dict[str, Any]) -> str:
    """The parts of an error body that say what is wrong (OpenAI's error object), else the whole body."""
    doc: Any = data
    if isinstance(data, bytes):
        text = data[:_ERROR_SCAN_BYTES].decode("utf-8", "replace")
        try:
            doc = safejson.loads(text)
        except ValueError:
            return text
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, str):
        return err
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        keys = ("message", "param", "code", "type", "n_prompt_tokens", "n_ctx")
        return " ".join(f"{k}: {err[k]}" for k in keys if err.get(k) is not None)
    return json.dumps(doc)  # FastAPI's {"detail": [...]}, or something else: all of it


def refuses_format(status: int, data: bytes) -> bool:
    """The server does not take the response_format it was sent (400/413/422/500 naming it).

    llama-cpp-python answers 500 to json_schema; others 400 or 422. A 400 about something else (a
    context overflow, a refused parameter, a bad message) is not a format refusal.
    """
    if status not in _REFUSAL_STATUSES or is_context_overflow(status, data):
        return False
    text = _error_text(data).lower()
    return any(w in text for w in _FORMAT_WORDS)


def refuses_token_param(status: int, data: bytes, sent: str) -> bool:
    """The server refuses the token-limit parameter it was sent (OpenAI reasoning models: max_tokens)."""
    if status not in (400, 422) or is_context_overflow(status, data):
        return False
    text = _error_text(data).lower()
    return sent in text and any(w in text for w in _REFUSED_WORDS)


def refuses_stop(status: int, data: bytes) -> bool:
    """The server refuses the `stop` parameter (OpenAI's reasoning models: "Unsupported parameter")."""
    return refuses_param(status, data, "stop")


def refuses_param(status: int, data: bytes, name: str) -> bool:
    """The server refuses the parameter `name`, quoted in its error ("Unsupported parameter: 'stop'",
    pydantic's "Extra inputs are not permitted" naming the field)."""
    if status not in (400, 422) or is_context_overflow(status, data):
        return False
    text = _error_text(data).lower()
    return any(f"{q}{name}{q}" in text for q in ("'", '"', "`")) and any(w in text for w in _REFUSED_WORDS)


def refuses_hold(status: int, data: bytes, names: tuple[str, ...]) -> bool:
    """The server refuses a request over how leg one is held (autod.planner.hold): a 400/413/422/500
    whose error names one of the fields `names` or structured output / guided decoding, in any form
    (OpenAI's "Unrecognized request argument supplied: grammar", a grammar its parser would not take,
    vLLM's "...one kind of structured outputs constraint...")."""
    if status not in _REFUSAL_STATUSES or is_context_overflow(status, data):
        return False
    text = _error_text(data).lower()
    return any(name in text for name in (*names, "structured output", "guided decoding"))


def is_context_overflow(status: int, data: bytes) -> bool:
    """The prompt (with the reply's token cap) does not fit the model's context window."""
    if status not in _REFUSAL_STATUSES:
        return False
    text = _error_text(data).lower()
    return any(w in text for w in _CONTEXT_WORDS)


def context_numbers(data: bytes) -> tuple[int | None, int | None]:
    """(context window, prompt tokens) when the error body states them, else None for each."""
    text = _error_text(data)
    limit = _LIMIT.search(text)
    prompt = _PROMPT.search(text)
    prompt_n = next((int(g) for g in prompt.groups() if g), None) if prompt else None
    return (int(limit.group(1)) if limit else None), prompt_n


def retry_after(value: str | None) -> float | None:
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


def retryable(status: int) -> bool:
    return status in (408, 429) or 500 <= status <= 599


def context_size(props: Any) -> int | None:
    """The context window a llama.cpp server states at GET /props (`n_ctx`), else None."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    for doc in (settings, props):
        n_ctx = safejson.count(doc.get("n_ctx")) if isinstance(doc, dict) else None
        if n_ctx:
            return n_ctx
    return None
