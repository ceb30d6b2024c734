"""What one exchange with a server leaves: a transcript's record of it, and a streamed reply as read.

A streamed reply is kept in a transcript as the text the model wrote (and why autod ended it), not
as its server-sent events; a reply a watch ended (autod.planner.earlystop) is handed to the parser
with the definition's rest in place of what was not generated.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import structlog

from autod.planner import wire
from autod.planner.earlystop import ReplyWatch

log = structlog.get_logger("autod.planner.llm")

MAX_REPLY_BYTES = 4 * 1024 * 1024

Read = tuple[ReplyWatch | None, int]  # a streamed reply's watch (if any) and the content chunks it read


def exchange(
    url: str, body: dict[str, Any], status: int, data: bytes, started: float,
    messages: Sequence[dict[str, str]], opening: str = "",
) -> dict[str, Any]:
    """One HTTP exchange for a transcript: what was asked (the messages by reference; a /completions
    prompt is those messages rendered, so it is not kept twice) and answered; `opening`: the answer's
    start autod wrote for the model (autod.planner.prefill)."""
    params = {k: v for k, v in body.items() if k not in ("messages", "prompt", "response_format", "model")}
    if opening:
        params["prefilled"] = opening
    fmt = body.get("response_format")
    return {
        "kind": "exchange",
        "endpoint": url,
        "messages": list(messages),
        "params": params,
        "response_format": fmt.get("type") if isinstance(fmt, dict) else None,
        "status": status,
        "reply": data[:MAX_REPLY_BYTES].decode("utf-8", "replace"),
        "ms": round((asyncio.get_running_loop().time() - started) * 1000),
    }


def said(ctype: str, data: bytes, read: Read | None) -> bytes:
    """What a transcript keeps of a reply: a streamed one as one document of the text the model wrote
    (and, when autod ended it, why); anything else as it came."""
    if read is None or not wire.is_sse(ctype, data):
        return data
    watch = read[0]
    if watch is not None:
        content, ended = watch.streamed, watch.stopped or None
    else:
        try:
            content, ended = wire.read_completion(ctype, data).content, None
        except wire.BadReply:
            return data
    doc = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    return json.dumps({**doc, "ended_early": ended}).encode()


def watched(reply: wire.Completion, watch: ReplyWatch | None, chunks: int, *, url: str) -> wire.Completion:
    """A streamed reply as the parser should read it: ended early, the definition's rest in place."""
    if reply.completion_tokens is None and chunks:
        reply.completion_tokens = chunks  # a stream sends a token a chunk
    if watch is not None and watch.stopped:
        reply.content, reply.finish_reason = watch.content(), "stop"
        reply.stopped_early = watch.stopped
        log.info("llm.reply_ended_early", endpoint=url, why=watch.stopped, echo=watch.echo,
                 lines_read=watch.lines, lines_spliced=watch.spliced, tokens=chunks)
    return reply
