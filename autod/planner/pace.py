"""How fast a server reads a prompt against how fast it writes a reply, measured on the replies it streamed.

autod.candidates.order prices each draw in generated tokens' time: the reply written, plus the part of
its prompt the server does not hold from the request before, read at `READ_PER_GENERATED` of a written
token's time. That ratio belongs to the server, not to autod: llama-cpp-python on two CPU cores reads
~4x faster than it writes (0.27 over characters on the held-out benches), the same server drafting the
copy (prompt lookup) less, a GPU server typically far more (not measured here). A plan priced with the
wrong ratio asks a long prompt (the wide one) too early or too late.

Every streamed reply tells both speeds. The time to its first content chunk is the prompt's new part
read (and one token written); the time after it is the rest of the reply written. The new part is the
prompt's text past what it shares with the last prompt sent to the same server (a single-slot server
keeps that one in its cache). Both are counted in characters and given in the unit the order counts
every size in: a token of `CHARS_PER_TOKEN` characters (autod.candidates.asker estimates a
definition's, a prompt's and a reply's tokens so). Counted in the server's tokens, as before, the two
were in different units: the prompt's new part converted at the densest characters per token the
window has measured (kept low so that budgets hold), a reply at a token a chunk, whatever code's tokens
hold. On llama-cpp-python with Qwen the two happen to come out close (0.18 then, 0.19 by characters;
the held-out runs drew much the same); a tokenizer whose prompt and reply tokens differ more had its
prompts mispriced.

Each reply gives one reading of each speed, if it is long enough to say something (`MIN_READ` new
prompt characters, `MIN_WRITTEN` characters written after the first chunk). A reply of a few tokens
is mostly its end (the stop token, the last chunk), a fixed cost: the leg ones and value replies that
open every cycle made the ratio 0.19 where longer replies and a fit over whole runs say 0.27. The
ratio is the median of the last `KEEP` readings of each, once there are `ENOUGH` of each; before that
the order keeps its own constant. A server that answers in one document (not streamed) gives no
reading.

What was measured outlives the daemon: the two medians are kept (`PaceMemory`: the state db,
autod.runtime.windows) whenever one moves by more than `KEPT_DRIFT`, and a restart or a config
reload starts from them (`seed`) instead of the constant. They come back as `ENOUGH` readings each, so
the plan made before the first reply is already priced at the server's speed, and three fresh
readings outvote them: a server that was moved to other hardware is measured anew within a few
replies.
"""

from __future__ import annotations

import asyncio
import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import structlog

from autod.planner import CHARS_PER_TOKEN
from autod.planner.window import WINDOW_MEMORY_S

log = structlog.get_logger("autod.planner.llm")

__all__ = ["Pace", "PaceMemory", "ServerPace", "Speeds", "drifted", "prompt_text", "shared_prefix"]

KEEP = 16
ENOUGH = 2
MIN_READ = 192  # new prompt characters: fewer, and a request's own overhead is most of the wait
# characters written after the first chunk: a shorter reply (a leg one, a value's one line) is mostly its
# end (the stop token, the last chunk), and took 17-30 ms a character where longer ones took 13
MIN_WRITTEN = 60
BOUNDS = (1 / 1000, 1.0)  # a ratio outside says the measurement is wrong, not the server
KEPT_DRIFT = 0.05  # a median that moved more than this since it was last kept is kept again
SECONDS = (1e-6, 60.0)  # a token's seconds either way that some server could take; outside: garbage


class Speeds(NamedTuple):
    """A server's median seconds per prompt token read and per reply token written, a token being
    `CHARS_PER_TOKEN` characters either way (the order's unit)."""

    read_s: float
    write_s: float

    def plausible(self) -> bool:
        """Both are finite seconds some server could take (not a corrupt or hand-edited record)."""
        return all(isinstance(v, float) and SECONDS[0] <= v <= SECONDS[1] for v in self)


class PaceMemory(Protocol):
    """Where a server's measured speeds are kept across restarts and config reloads, keyed by the
    server and the model."""

    async def recall_pace(self, key: str) -> Speeds | None: ...

    async def keep_pace(self, key: str, speeds: Speeds) -> None: ...


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

    def observe(self, read_chars: int, read_s: float, written_chars: int, write_s: float) -> None:
        """One streamed reply: `read_s` to its first chunk for `read_chars` new prompt characters, then
        `write_s` for `written_chars` more characters of content."""
        if read_chars >= MIN_READ and read_s > 0:
            self._read.append(read_s / read_chars * CHARS_PER_TOKEN)
        if written_chars >= MIN_WRITTEN and write_s > 0:
            self._write.append(write_s / written_chars * CHARS_PER_TOKEN)

    def read_per_generated(self) -> float | None:
        """A prompt token's time in reply tokens' time, or None until measured."""
        speeds = self.speeds()
        if speeds is None:
            return None
        return min(BOUNDS[1], max(BOUNDS[0], speeds.read_s / speeds.write_s))

    def speeds(self) -> Speeds | None:
        """The medians of the readings, once there are `ENOUGH` of each."""
        if len(self._read) < ENOUGH or len(self._write) < ENOUGH:
            return None
        return Speeds(statistics.median(self._read), statistics.median(self._write))

    def seed(self, kept: Speeds) -> bool:
        """Start from speeds an earlier run measured (as `ENOUGH` readings each), unless this one has
        readings of its own already. Whether it did."""
        if self._read or self._write or not kept.plausible():
            return False
        self._read.extend([kept.read_s] * ENOUGH)
        self._write.extend([kept.write_s] * ENOUGH)
        return True

    def as_dict(self) -> dict[str, Any]:
        """What the `llm.pace` debug line shows of it: the median milliseconds a token each way."""
        return {"read_ms_per_token": _ms(self._read), "write_ms_per_token": _ms(self._write),
                "readings": min(len(self._read), len(self._write))}


class ServerPace(Pace):
    """One endpoint's pace, recalled from where an earlier run kept it and kept there as it moves."""

    def __init__(self, url: str, key: str) -> None:
        super().__init__()
        self.url = url
        self.key = key
        self.memory: PaceMemory | None = None
        self._recalled = False
        self._kept: Speeds | None = None  # what was last kept (or recalled)

    async def recall(self) -> None:
        """Start from what an earlier run kept, once (before this run's first plan is priced)."""
        if self._recalled or self.memory is None:
            return
        self._recalled = True
        try:
            kept = await asyncio.wait_for(self.memory.recall_pace(self.key), WINDOW_MEMORY_S)
        except Exception as exc:  # a convenience: the order's constant until measured
            log.warning("llm.pace_not_recalled", endpoint=self.url, error=type(exc).__name__)
            return
        if kept is not None and self.seed(kept):
            self._kept = kept
            log.info("llm.pace_recalled", endpoint=self.url, read_per_generated=round(
                self.read_per_generated() or 0.0, 4), **self.as_dict())

    async def keep(self) -> None:
        """Keep the medians where a restart finds them, when they moved since last kept."""
        now = self.speeds()
        if self.memory is None or now is None or not drifted(now, self._kept):
            return
        self._kept = now  # tried once per move: a state db that fails is not asked again for it
        try:
            await asyncio.wait_for(self.memory.keep_pace(self.key, now), WINDOW_MEMORY_S)
        except Exception as exc:
            log.warning("llm.pace_not_kept", endpoint=self.url, error=type(exc).__name__)


def drifted(now: Speeds, kept: Speeds | None) -> bool:
    """`now` is worth keeping over `kept`: nothing was kept, or a median moved past `KEPT_DRIFT`."""
    return kept is None or any(abs(a - b) > KEPT_DRIFT * b for a, b in zip(now, kept, strict=True))


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
