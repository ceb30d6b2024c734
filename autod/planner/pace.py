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

Each reply gives one reading of each side: (characters, seconds). Neither is only its characters'
time: a request has its own overhead before the first chunk, and a reply its end (the stop token, the
last chunk), a fixed cost that is most of a reply of a few tokens. Taken as seconds over characters,
the leg ones and value replies that open every cycle made the ratio 0.19 where a fit over whole runs
says 0.27. So each side is a line, seconds = fixed + characters x per-character, fitted over the last
`KEEP` readings by Siegel's repeated median (`fit`: robust to a reading a busy server spoilt, and no
threshold on a reply's length: the fixed part is measured, not guessed), once there are `ENOUGH` of
each; the slope is the speed. Readings all of one size cannot separate the two: then the slope is the
median reading's own ratio. Before `ENOUGH` readings the order keeps its own constant. A server that
answers in one document (not streamed) gives no reading.

What was measured outlives the daemon: the two speeds are kept (`PaceMemory`: the state db,
autod.runtime.windows) whenever one moves by more than `KEPT_DRIFT`, and a restart or a config
reload starts from them (`seed`) instead of the constant, so the plan made before the first reply is
already priced at the server's speed, until `ENOUGH` fresh readings of each replace them: a server
that was moved to other hardware is measured anew within a few replies.
"""

from __future__ import annotations

import asyncio
import math
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
# readings of each before the fits are believed: a line through two or three is mostly their noise (on
# the held-out runs' first replies, 0.09-0.51 where the whole runs say 0.26-0.28; from five, 0.23-0.38)
ENOUGH = 5
# two readings tell a slope when their sizes differ by at least a third of the larger: closer, and the
# noise of the fixed part is most of the difference
SPREAD = 3
INLIER = 2.5  # a reading this many robust deviations off the line is an outlier (a busy server's)
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
    """One server's measured seconds per prompt token read and per reply token written, and the fixed
    part of each (a request's overhead before its first chunk, a reply's end)."""

    def __init__(self) -> None:
        self._read: deque[tuple[int, float]] = deque(maxlen=KEEP)  # (new prompt characters, seconds)
        self._write: deque[tuple[int, float]] = deque(maxlen=KEEP)  # (characters written, seconds)
        self._seeded: Speeds | None = None
        self._last = ""

    def sent(self, text: str) -> int:
        """A prompt is being sent: the characters of it the server does not hold from the last one."""
        new = len(text) - shared_prefix(self._last, text)
        self._last = text
        return new

    def observe(self, read_chars: int, read_s: float, written_chars: int, write_s: float) -> None:
        """One streamed reply: `read_s` to its first chunk for `read_chars` new prompt characters, then
        `write_s` for `written_chars` more characters of content. A size of 0 is a reading too: the
        fixed part alone."""
        if read_chars >= 0 and _seconds(read_s):
            self._read.append((read_chars, read_s))
        if written_chars >= 0 and _seconds(write_s):
            self._write.append((written_chars, write_s))

    def read_per_generated(self) -> float | None:
        """A prompt token's time in reply tokens' time, or None until measured."""
        speeds = self.speeds()
        if speeds is None:
            return None
        return min(BOUNDS[1], max(BOUNDS[0], speeds.read_s / speeds.write_s))

    def speeds(self) -> Speeds | None:
        """Seconds a token each way, the slopes of the fits, once there are `ENOUGH` readings of each;
        until then what an earlier run kept (`seed`), if anything."""
        lines = self._lines()
        if lines is None:
            return self._seeded
        return Speeds(lines[0][1] * CHARS_PER_TOKEN, lines[1][1] * CHARS_PER_TOKEN)

    def _lines(self) -> tuple[tuple[float, float], tuple[float, float]] | None:
        if len(self._read) < ENOUGH or len(self._write) < ENOUGH:
            return None
        read, write = fit(self._read), fit(self._write)
        return (read, write) if read is not None and write is not None else None

    def seed(self, kept: Speeds) -> bool:
        """Start from speeds an earlier run measured, until this one has `ENOUGH` readings of each;
        never over readings of its own. Whether it did."""
        if self._read or self._write or not kept.plausible():
            return False
        self._seeded = kept
        return True

    def as_dict(self) -> dict[str, Any]:
        """What the `llm.pace` debug line shows of it: milliseconds a token each way, and each side's
        fixed part (a request's overhead before its first chunk; a reply's end)."""
        speeds, lines = self.speeds(), self._lines()
        return {"read_ms_per_token": _ms(speeds.read_s) if speeds else None,
                "write_ms_per_token": _ms(speeds.write_s) if speeds else None,
                "read_fixed_ms": _ms(lines[0][0]) if lines else None,
                "write_fixed_ms": _ms(lines[1][0]) if lines else None,
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


def fit(points: Sequence[tuple[int, float]]) -> tuple[float, float] | None:
    """(fixed seconds, seconds a character) of the line through (characters, seconds) readings.

    Least median of squares, then least squares over the readings it does not call outliers: each
    positive slope two readings give (their sizes at least a third of the larger apart) is tried, with
    the intercept that halves the readings, and the one whose median residual is smallest wins; the
    readings within `INLIER` of its robust scale are then fitted by least squares. Up to half the
    readings may be spoilt (a server busy with another client) without moving it. No two readings far
    enough apart: the median reading's own ratio, through the origin. None when no slope is positive.
    """
    pts = list(points)
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(pts) for x2, y2 in pts[i + 1 :]
              if abs(x2 - x1) * SPREAD >= max(x1, x2) > 0 and (y2 - y1) / (x2 - x1) > 0]
    if not slopes:
        ratios = [y / x for x, y in pts if x > 0]
        slope = statistics.median(ratios) if ratios else 0.0
        return (0.0, slope) if slope > 0 else None

    def residual(b: float) -> tuple[float, float]:
        a = statistics.median(y - b * x for x, y in pts)
        return statistics.median(abs(y - a - b * x) for x, y in pts), a

    slope = min(slopes, key=lambda b: residual(b)[0])
    spread, fixed = residual(slope)
    near = [(x, y) for x, y in pts if abs(y - fixed - slope * x) <= INLIER * 1.4826 * spread + 1e-9]
    n = len(near)
    mx, my = sum(x for x, _ in near) / n, sum(y for _, y in near) / n
    sxx = sum((x - mx) ** 2 for x, _ in near)
    if sxx > 0:
        b = sum((x - mx) * (y - my) for x, y in near) / sxx
        if b > 0:
            slope, fixed = b, my - b * mx
    return max(0.0, fixed), slope


def _seconds(s: float) -> bool:
    return isinstance(s, float | int) and math.isfinite(s) and s > 0


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)
