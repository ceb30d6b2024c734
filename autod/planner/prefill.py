"""Starting a greedy reply with the part of the definition it would only copy (`llm.prefill`).

A focused prompt asks for one definition back, fixed (autod.modes.debug), and a small model on a CPU
generates ~15 tokens a second while it reads a prompt ~7 times faster. Most of a reply is the
definition copied, and its head (decorators, signature, docstring) is copied first, token by token.
Where the server lets autod write the start of the model's answer, that head is given as the answer's
opening and the model generates from the first statement of the body on; the reply autod reads is the
opening and what the model added, so everything downstream (the early stop, the parser, the judge)
sees one whole reply as before.

Only the draw at temperature 0 is started this way. Its reply is the model's likeliest text, which
copies the head as shown (the benches' traces: no greedy change in a head was ever a fix); a sampled
draw explores, and may rightly change a signature's default, so it is asked whole.

`chatml`: the server's /completions endpoint with the prompt rendered in the ChatML template
(Qwen, and the many models trained on it; llama-cpp-python, llama.cpp, vLLM all serve raw
completions). autod renders that template itself, so it owns the boundary between the roles: a
prompt whose text holds anything shaped like a control token (`<|...|>`, which such servers read as
the token itself) is never rendered, and goes to the chat endpoint as every other request does.

`auto` (the default): chatml when the server's own tokenizer says its model speaks it, asked once:
llama-cpp-python (`/extras/tokenize`), llama.cpp and vLLM (`/tokenize`) count the tokens of a text,
and a model trained on ChatML reads `<|im_start|><|im_end|>` as exactly two (one each; any other
vocabulary spells them out in several). A server that cannot be asked is asked on its chat endpoint.
"""

from __future__ import annotations

import ast
import asyncio
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from autod import pyast
from autod.linebreaks import split_lines
from autod.planner.fences import fence_for
from autod.safety import safejson

__all__ = ["CONTROL", "chatml", "completions_body", "head", "opening", "read_capped", "speaks_chatml"]

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# ChatML's and its kin's control tokens (<|im_start|>, <|endoftext|>, <|fim_prefix|>, <|eot_id|>):
# any such shape, not a list of names, so a model's own variant is refused too
CONTROL = re.compile(r"<[|\uff5c][^\s<>]{0,64}?[|\uff5c]>")


def head(code: str) -> str:
    """The lines of a definition before the first statement of its body that is not its docstring
    (decorators, signature, docstring), exactly as `code` has them; "" when it does not parse as one
    definition or has no such statement."""
    lines = split_lines(code)
    try:
        tree = pyast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return ""
    if len(tree.body) != 1 or not isinstance(tree.body[0], _DEFINITIONS):
        return ""
    body = tree.body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return ""
    # where the statement starts (1-based line, column): a decorated one at its first decorator's `@`
    decorators = getattr(body[0], "decorator_list", None) or []
    first, col = min([(body[0].lineno, body[0].col_offset),
                      *((d.lineno, d.col_offset - 1) for d in decorators)])
    dedented = split_lines(textwrap.dedent(code))
    if first <= 1 or dedented[first - 1][:col].strip():
        return ""  # the statement shares its line with the signature or the docstring: no line to begin at
    return "\n".join(lines[: first - 1])


def opening(code: str) -> str:
    """The answer's start for a reply that rewrites `code`: the block's fence, as the prompt fences
    it, and the definition's head; "" when there is no head to give."""
    first = head(code)
    return f"{fence_for(code)}python\n{first}\n" if first else ""


def chatml(messages: Sequence[Mapping[str, Any]], answer_start: str) -> str | None:
    """The messages in the ChatML template, the assistant's answer begun with `answer_start`; None when
    any text holds a control token's shape (it would be read as the token, not as text)."""
    parts = []
    for m in messages:
        role, content = str(m.get("role", "")), m.get("content")
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            return None
        parts.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
    parts.append(f"<|im_start|>assistant\n{answer_start}")
    text = "".join(parts)
    body_text = "".join(str(m.get("content", "")) for m in messages) + answer_start
    return None if CONTROL.search(body_text) else text


def completions_body(chat: Mapping[str, Any], prompt: str) -> dict[str, Any]:
    """A /chat/completions body as a /completions one: the same parameters, the rendered prompt in
    place of the messages (no response_format: a prefilled reply is free text)."""
    body = {k: v for k, v in chat.items() if k not in ("messages", "response_format", "n")}
    body["prompt"] = prompt
    return body


MARKERS = "<|im_start|><|im_end|>"
_TOKENIZE = ("extras/tokenize", "tokenize")  # llama-cpp-python's; llama.cpp's and vLLM's
_TOKENIZE_BYTES = 64 * 1024


async def speaks_chatml(client: httpx.AsyncClient, root: str, model: str, timeout_s: float) -> bool | None:
    """Whether the server's model reads ChatML's two markers as one token each (its tokenizer asked,
    at the server's root); None when the server was too busy to say (ask again later)."""
    for path in _TOKENIZE:
        counts: list[int] = []
        for text in (MARKERS, ""):  # the empty text: what the tokenizer adds of its own (a BOS)
            body = {"input": text, "content": text, "prompt": text, "model": model}  # each server's
            try:
                async with client.stream("POST", f"{root}/{path}", json=body, timeout=timeout_s) as resp:
                    data = await read_capped(resp, _TOKENIZE_BYTES, timeout_s) if resp.is_success else None
            except httpx.TimeoutException:
                return None
            except httpx.HTTPError:
                break
            count = _count(data) if data is not None else None
            if count is None:
                break
            counts.append(count)
        if len(counts) == 2:
            return counts[0] - counts[1] == 2
    return False


async def read_capped(resp: httpx.Response, limit: int, within_s: float) -> bytes | None:
    """A streamed response's body, read no further than `limit` bytes (None past it: not the short
    answer a probe asked for) and for no longer than `within_s` seconds (then httpx.ReadTimeout, as a
    server too busy to answer). A server's probe answers are untrusted: a body that never ends, or
    comes a byte at a time, must not hold the planner (a read timeout never fires while bytes come)."""
    data = bytearray()
    try:
        async with asyncio.timeout(within_s):
            async for part in resp.aiter_bytes():
                data += part
                if len(data) > limit:
                    return None
    except TimeoutError:
        raise httpx.ReadTimeout(f"body not read in {within_s:g} s", request=resp.request) from None
    return bytes(data)


def _count(data: bytes) -> int | None:
    try:
        doc = safejson.loads(data)
    except ValueError:
        return None
    if isinstance(doc, dict) and isinstance(doc.get("tokens"), list):
        return len(doc["tokens"])
    count = doc.get("count") if isinstance(doc, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None
