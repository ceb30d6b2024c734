"""Capped exponential backoff: the one rule for every loop that waits longer after each failure
(a crashed source, an event tried again, the LLM endpoint, a webhook, the memory store, the metrics port)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff"]

MAX_DOUBLINGS = 30  # 2**30 times any first delay is past every cap; keeps the float finite


@dataclass(frozen=True)
class Backoff:
    """Wait `first_s * 2**attempt` (attempt 0: the first retry), at most `max_s`, drawn uniformly
    between `spread` fractions of that: (0.8, 1.2) is +-20 %, so daemons (or webhooks) that failed
    together do not retry in step; (1.0, 1.0), the default, is no jitter."""

    first_s: float
    max_s: float
    spread: tuple[float, float] = (1.0, 1.0)

    def nominal(self, attempt: int) -> float:
        """The delay before jitter: doubled per attempt, capped."""
        return min(self.max_s, self.first_s * 2 ** min(max(attempt, 0), MAX_DOUBLINGS))

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry number `attempt + 1`; `rand` in [0, 1) draws the jitter."""
        low, high = self.spread
        nominal = self.nominal(attempt)
        if low == high:
            return nominal * low
        return nominal * (low + (high - low) * rand())
