"""Reading a streamed reply as it arrives, so a watch can end it (autod.planner.earlystop).

The body is server-sent events (`data: {chunk}` lines). Each complete line is read once, as it
arrives; the content deltas go to the watch, and when the watch says the rest cannot change the fix
the response is closed, which ends the generation on servers that stop on a client's disconnect
(llama-cpp-python, llama.cpp, vLLM, Ollama, OpenAI). What was read is returned cut at its last whole
line, so the usual SSE reader (autod.planner.wire) assembles it. A server that answers a streamed
request with one JSON document is read whole, unwatched.
"""

from __future__ import annotations

import asyncio

import httpx

from autod.errors import PlanInvalid
from autod.planner import wire
from autod.planner.earlystop import ReplyWatch
from autod.safety import safejson

__all__ = ["read_watched"]


async def read_watched(
    resp: httpx.Response, watch: ReplyWatch | None, cap: int
) -> tuple[bytes, int, float | None, int]:
    """The body of a 2xx streamed response, read until it ends or `watch` (if any) ends it, how many
    content chunks it held (a server's stream sends a token a chunk), the loop time the first of them
    came (None: none came), and the characters of content after that first chunk: what was written in
    the time from it to the end (autod.planner.pace). Raises PlanInvalid over `cap`."""
    streamed = wire.is_sse(resp.headers.get("content-type", ""), b"")
    buf = bytearray()
    done = 0  # offset in buf up to which whole lines were read
    chunks = 0
    first: float | None = None
    written = 0  # content characters after the first chunk
    async for part in resp.aiter_bytes():
        buf += part
        if len(buf) > cap:
            raise PlanInvalid("reply too large")
        if not streamed:
            if len(buf) < 4096 and b"\n" not in buf:
                continue
            streamed = wire.is_sse("", bytes(buf[:4096]))
            if not streamed:
                continue  # one JSON document: read it whole
        while (nl := buf.find(b"\n", done)) >= 0:
            line = bytes(buf[done:nl]).strip()
            done = nl + 1
            delta = _delta(line)
            if delta is None:
                continue
            chunks += 1
            if first is None:
                first = asyncio.get_running_loop().time()
            else:
                written += len(delta)
            if watch is not None and watch.feed(delta):
                return bytes(buf[:done]), chunks, first, written
    return bytes(buf), chunks, first, written


def _delta(line: bytes) -> str | None:
    """The content delta of one SSE line, or None (not a data line, the end, garbage: the SSE reader
    judges the whole body afterwards)."""
    if not line.startswith(b"data:"):
        return None
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return None
    try:
        chunk = safejson.loads(payload)
    except ValueError:
        return None
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    delta = choices[0].get("delta")
    if isinstance(delta, dict):
        content = wire.text_of(delta.get("content"))
    else:  # a /completions chunk (autod.planner.prefill)
        content = choices[0].get("text") if isinstance(choices[0].get("text"), str) else ""
    return content or None
