"""Every limit in one place: rate, caps, token budget, quarantine, LLM circuit breaker."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from autod.act.edits import Caps
from autod.config.settings import Limits
from autod.events import FAILURE_KINDS, Event, EventKind
from autod.stores.state import State, day_key


@dataclass
class Verdict:
    """Whether a cycle may start now; if not, how long to wait and why (status shows it)."""

    ok: bool
    wait_s: float = 0.0
    reason: str = ""
    drop: bool = False  # the event must not be retried (quarantined fingerprint)


def _seconds_to_next_utc_day(now: float) -> float:
    dt = datetime.fromtimestamp(now, UTC)
    nxt = (dt + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1.0, (nxt - dt).total_seconds())


class CircuitBreaker:
    """Opens after `threshold` consecutive LLM failures; half-opens after `cooldown_s`.

    `clock` gives monotonic seconds (a wall-clock step must not open or close it); tests pass their own.
    """

    def __init__(
        self, threshold: int, cooldown_s: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.failures = 0
        self.opened_at: float | None = None  # on `clock`
        self._clock = clock

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self._clock() - self.opened_at >= self.cooldown_s else "open"

    def allow(self) -> tuple[bool, float]:
        st = self.state
        if st == "open":
            assert self.opened_at is not None
            return False, self.cooldown_s - (self._clock() - self.opened_at)
        return True, 0.0

    def half_open(self) -> None:
        """The LLM answers again (autod.runtime.outage, `autod retry`): let one cycle try now, not after the
        cooldown; a failure re-opens the breaker at once."""
        if self.state == "open":
            self.opened_at = self._clock() - self.cooldown_s

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None

    def failure(self) -> None:
        self.failures += 1
        if self.state == "half-open" or self.failures >= self.threshold:
            self.opened_at = self._clock()

    def snapshot(self) -> dict[str, object]:
        """What `autod status` shows; `opened_at` as wall-clock epoch seconds, whatever the clock."""
        opened = None if self.opened_at is None else time.time() - (self._clock() - self.opened_at)
        return {"state": self.state, "consecutive_failures": self.failures, "opened_at": opened}


class Gate:
    """Checks limits before a cycle and books what a cycle spent after it."""

    def __init__(self, limits: Limits, state: State, breaker: CircuitBreaker | None) -> None:
        self.limits = limits
        self.state = state
        self.breaker = breaker
        self.waiting_reason = ""

    def admit(self, event: Event, *, uses_llm: bool, now: float | None = None) -> Verdict:
        """Sync (runs on the state thread). The order is the order an operator reads the reasons in."""
        now = now if now is not None else time.time()
        lim = self.limits
        fp = self.state.fingerprint(event.fingerprint) if event.kind in FAILURE_KINDS else None
        if fp and fp.get("quarantined_at"):
            return Verdict(False, reason=f"fingerprint {event.fingerprint} is quarantined", drop=True)
        last = self.state.last_cycle_started()
        if last is not None and now - last < lim.min_interval_s:
            return Verdict(False, lim.min_interval_s - (now - last), "min_interval_s")
        starts = self.state.cycle_starts_since(now - 3600)
        if len(starts) >= lim.max_cycles_per_hour:
            # a slot frees when the oldest cycle that keeps the count at the cap leaves the hour
            frees_at = starts[len(starts) - lim.max_cycles_per_hour] + 3600
            return Verdict(
                False,
                max(1.0, frees_at - now),
                f"max_cycles_per_hour ({len(starts)}/{lim.max_cycles_per_hour})",
            )
        if uses_llm:
            spent = self.state.get(f"tokens:{day_key(now)}")
            if spent >= lim.max_tokens_per_day:
                return Verdict(
                    False,
                    _seconds_to_next_utc_day(now),
                    f"max_tokens_per_day spent ({spent}/{lim.max_tokens_per_day});"
                    " waiting for the next UTC day",
                )
            if self.breaker is not None:
                ok, wait = self.breaker.allow()
                if not ok:
                    return Verdict(False, max(1.0, wait), "LLM circuit breaker open")
        if self.state.get(f"edits:{day_key(now)}") >= lim.max_edits_per_day and event.kind in FAILURE_KINDS:
            return Verdict(False, _seconds_to_next_utc_day(now), "max_edits_per_day reached")
        return Verdict(True)

    def caps(self, now: float | None = None) -> Caps:
        """Caps for one plan: per-cycle caps, further bounded by what is left of the day."""
        left = self.limits.max_edits_per_day - self.state.get(f"edits:{day_key(now)}")
        return Caps(
            max_edits=max(0, min(self.limits.max_edits_per_cycle, left)),
            max_lines=self.limits.max_lines_per_cycle,
            max_file_bytes=self.limits.max_file_bytes,
        )

    def book(self, *, edits: int, tokens: int, now: float | None = None) -> None:
        day = day_key(now)
        if edits:
            self.state.add(f"edits:{day}", edits)
        if tokens:
            self.state.add(f"tokens:{day}", tokens)

    def record_attempt(self, event: Event, status: str, last_attempt: dict[str, object] | None) -> bool:
        """Count an attempt on a failure fingerprint; True when it is now quarantined."""
        if event.kind not in FAILURE_KINDS:
            return False
        if status == "fixed":
            self.state.fingerprint_resolved(event.fingerprint)
            return False
        check = event.payload.get("check") if event.kind == EventKind.CHECK_FAILED else None
        attempts = self.state.fingerprint_attempted(
            event.fingerprint, event.summary, status, last_attempt, check if isinstance(check, str) else None
        )
        if attempts >= self.limits.max_attempts_per_fingerprint:
            self.state.quarantine(event.fingerprint)
            return True
        return False

    def counters(self, now: float | None = None) -> dict[str, dict[str, int]]:
        day = day_key(now)
        now = now if now is not None else time.time()
        return {
            "cycles_last_hour": {
                "used": self.state.cycles_since(now - 3600),
                "cap": self.limits.max_cycles_per_hour,
            },
            "edits_today": {"used": self.state.get(f"edits:{day}"), "cap": self.limits.max_edits_per_day},
            "tokens_today": {"used": self.state.get(f"tokens:{day}"), "cap": self.limits.max_tokens_per_day},
        }
