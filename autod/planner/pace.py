"""How fast a server reads a prompt against how fast it writes a reply, measured on the replies it streamed.

autod.candidates.order prices each draw in generated tokens' time: the reply written, plus the part of
its prompt the server does not hold from the request before, read at `READ_PER_GENERATED` of a written
token's time. That ratio belongs to the server, not to autod: llama-cpp-python on two CPU cores reads
~9x faster than it writes, the same server drafting the copy (prompt lookup) ~4x, a GPU server typically
far more (not measured here). A plan priced with the wrong ratio asks a long prompt (the wide one) too
early or too late.

Every streamed reply tells both speeds. The time to its first content chunk is the prompt's new part
read (and one token written); the time after it is the rest of the reply written, a token a chunk.
The new part is the prompt's text past what it shares with the last prompt sent to the same server
(a single-slot server keeps that one in its cache), in the server's own tokens (the characters a token
held in the prompts it counted). Each reply gives one reading of each speed, if it is long enough to
say something (`MIN_READ` new prompt tokens, `MIN_WRITTEN` tokens written): the ratio is the median of
the last `KEEP` readings of each, once there are `ENOUGH` of each; before that the order keeps its own
constant. A server that answers in one document (not streamed) gives no reading.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Pace", "prompt_text", "shared_prefix"]

KEEP = 16
ENOUGH = 2
MIN_READ = 64  # new prompt tokens: fewer, and a request's own overhead is most of the wait
MIN_WRITTEN = 8  # tokens written after the first
BOUNDS = (1 / 1000, 1.0)  # a ratio outside says the measurement is wrong, not the server


class Pace:
    """One server's measured seconds per prompt token read and per reply token written."""

    def __init__(self) -> None:
        self._read: deque[float] = deque(maxlen=KEEP)
        self._write: deque[float] = deque(maxlen=KEEP)
        self._last = ""

    def sent(self, text: str) -> int:
        """A prompt is being sent: the characters of it the server does not hold from the last one."""
        new = len(text) - shared_prefix(self._last, text)
        self._last = text
        return new

    def observe(self, read_tokens: float, read_s: float, written: int, write_s: float) -> None:
        """One streamed reply: `read_s` to its first chunk for `read_tokens` new prompt tokens, then
        `write_s` for `written` more chunks."""
        if read_tokens >= MIN_READ and read_s > 0:
            self._read.append(read_s / read_tokens)
        if written >= MIN_WRITTEN and write_s > 0:
            self._write.append(write_s / written)

    def read_per_generated(self) -> float | None:
        """A prompt token's time in reply tokens' time, or None until measured."""
        if len(self._read) < ENOUGH or len(self._write) < ENOUGH:
            return None
        ratio = statistics.median(self._read) / statistics.median(self._write)
        return min(BOUNDS[1], max(BOUNDS[0], ratio))

    def as_dict(self) -> dict[str, Any]:
        """What the `llm.pace` debug line shows of it: the median milliseconds a token each way."""
        return {"read_ms_per_token": _ms(self._read), "write_ms_per_token": _ms(self._write),
                "readings": min(len(self._read), len(self._write))}


def shared_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b` (compared in C, halving: fast on long
    prompts that share most of their text)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def prompt_text(body: Mapping[str, Any]) -> str:
    """A request's prompt as one text: a /completions prompt as sent; chat messages in ChatML's shape,
    which is how the servers autod renders for read them (another template's prefix is shared alike)."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    messages: Sequence[Any] = body.get("messages") or ()
    return "".join(f"<|im_start|>{m.get('role')}\n{m.get('content')}<|im_end|>\n"
                   for m in messages if isinstance(m, Mapping)) + "<|im_start|>assistant\n"


def _ms(values: deque[float]) -> float | None:
    return round(statistics.median(values) * 1000, 2) if values else None
