"""What happens to an event after its cycle: done, or tried again later (with backoff), or given up.

Two kinds of event come back:

- one whose cycle failed for a reason outside the repository (the LLM unreachable or answering
  garbage, a budget spent: `CycleError.external`). The event is not the problem, so it stays queued
  and is tried again after a jittered, capped, exponential backoff, up to `limits.max_retries` times;
- a check failure that is still failing after a cycle that did not fix it (rolled back, refused, no
  edits). It is attempted again later, within `limits.max_attempts_per_fingerprint`: each of those
  cycles counts an attempt on the fingerprint, which is quarantined when they are spent.

Before a deferred event is planned again the dispatcher checks it against the present
(`autod.runtime.freshness`), so a failure fixed meanwhile is resolved without a cycle. `run --once` does not
wait to attempt a still-failing failure again: it exits 1, and the next run's start-up check reports it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from autod.backoff import Backoff
from autod.config.settings import Limits
from autod.errors import CycleError, LLMUnavailable
from autod.events import Event, EventKind
from autod.reflection import Reflection
from autod.stores.queue_retries import AGAIN, OUTAGE, OUTSIDE

JITTER = 0.2  # each delay is drawn from +-20 % around its nominal value, so retries do not march in step
STILL_FAILING = frozenset({"rolled_back", "rejected", "no_change"})


@dataclass(frozen=True)
class Decision:
    """`done`: ack the event; `retry`: defer it `delay_s`; `give_up`: ack it with an error line."""

    action: str
    delay_s: float = 0.0
    reason: str = ""
    kind: str = ""  # a retry's: what it waits for (autod.stores.queue_retries: outage, outside, again)

    @property
    def retry(self) -> bool:
        return self.action == "retry"


class RetryPolicy:
    def __init__(
        self, limits: Limits, *, once: bool = False, rand: Callable[[], float] = random.random
    ) -> None:
        self.limits = limits
        self.once = once
        self._rand = rand

    def delay(self, retries: int) -> float:
        """The wait before try number `retries + 1`: base * 2**retries, capped, with jitter."""
        rule = Backoff(self.limits.retry_base_s, self.limits.retry_max_s, (1 - JITTER, 1 + JITTER))
        return rule.delay(retries, self._rand)

    def decide(self, event: Event, r: Reflection, error: CycleError | None, retries: int) -> Decision:
        """After a cycle on `event` (deferred `retries` times so far) ended as `r`."""
        if error is not None and error.external:
            why = f"{r.status}: {r.reason or type(error).__name__}"
            if retries >= self.limits.max_retries:
                return Decision("give_up", reason=f"{why}; tried {retries + 1} times (limits.max_retries)")
            # an unreachable LLM is retried as soon as it answers again (autod.runtime.outage), not only later
            kind = OUTAGE if isinstance(error, LLMUnavailable) else OUTSIDE
            return Decision("retry", self.delay(retries), why, kind)
        if (
            event.kind == EventKind.CHECK_FAILED
            and r.status in STILL_FAILING
            and not r.quarantined
            and not self.once
        ):
            # The repository's answer, not an outage: the fingerprint's attempts bound these tries.
            why = f"still failing after a cycle that {r.status}"
            return Decision("retry", self.delay(retries), why, AGAIN)
        return Decision("done")
