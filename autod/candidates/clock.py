"""A cycle's draws against the clock: how far it is, for a person, and its deadline.

`candidates.max_cycle_minutes` (or `autod run --once --max-minutes`) bounds a cycle's wall time from
its start: past it no draw starts and the one in flight is dropped (a draw writes nothing), while a
candidate already being verified finishes (its checks have deadlines of their own) so no edit is ever
half-applied. The cycle then ends with what it has: a fix it found is kept, else the record's reason
names the deadline.

The progress a person sees (`autod status`, the `candidates.progress` log line `--once` prints):
draws done and planned in the current attempt, the model time spent, and an estimate of what is left
from the mean cost of the draws so far.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from autod.config.settings import CandidatesConfig

__all__ = ["DrawProgress", "cycle_deadline", "deadline_note", "progress"]


class Drawn(Protocol):
    model_ms: int
    checks_ms: int
    part: bool


@dataclass(frozen=True)
class DrawProgress:
    done: int  # draws the cycle made (each a reply of the model)
    planned: int  # done + those the current attempt still has in its plan
    model_s: float  # the model's time on them
    checks_s: float  # the checks' time on their candidates
    eta_s: float | None  # the rest of the plan at the mean cost so far (None before the first draw)
    deadline_in_s: float | None  # till the cycle's deadline (None: no deadline)

    def as_dict(self) -> dict[str, Any]:
        return {"done": self.done, "planned": self.planned, "model_s": round(self.model_s, 1),
                "checks_s": round(self.checks_s, 1),
                "eta_s": None if self.eta_s is None else round(self.eta_s),
                "deadline_in_s": None if self.deadline_in_s is None else round(self.deadline_in_s)}

    def line(self) -> str:
        """`draw 3 of 9, model time 2m10s, about 5m left` for a person."""
        out = f"draw {self.done} of {self.planned}, model time {span(self.model_s)}"
        if self.eta_s is not None:
            out += f", about {span(self.eta_s)} left" if self.planned > self.done else ", the last draw"
        if self.deadline_in_s is not None:
            out += f", deadline in {span(max(0.0, self.deadline_in_s))}"
        return out


def progress(drawn: Sequence[Drawn], left: int, deadline: float | None,
             now: float | None = None) -> DrawProgress:
    """Where a cycle's search stands: `drawn` its candidates so far, `left` the draws the current
    attempt still plans, `deadline` a time.monotonic() one (or None)."""
    draws = [c for c in drawn if not c.part]  # a part of a reply is no draw: it cost no model time
    model_s = sum(c.model_ms for c in draws) / 1000
    checks_s = sum(c.checks_ms for c in drawn) / 1000
    eta = (model_s + checks_s) / len(draws) * left if draws else None
    now = time.monotonic() if now is None else now
    return DrawProgress(len(draws), len(draws) + max(0, left), model_s, checks_s, eta,
                        None if deadline is None else deadline - now)


def cycle_deadline(cfg: CandidatesConfig, started: float) -> float | None:
    """The time.monotonic() past which a cycle started at `started` draws no more (None: no bound)."""
    return started + cfg.max_cycle_minutes * 60 if cfg.max_cycle_minutes > 0 else None


def deadline_note(minutes: float, done: int, planned: int, left_s: float | None = None) -> str:
    """The record's reason for a cycle stopped at its deadline; `left_s`, the seconds still left to it
    when the cycle stopped sooner because no draw left was expected to finish (autod.candidates.fits)."""
    bound = f"({minutes:g} min, candidates.max_cycle_minutes)"
    if left_s is not None and left_s >= 1:
        return (f"stopped before the cycle's deadline {bound}: no draw left would finish in the "
                f"{span(left_s)} left, after {done} of {planned} planned draws")
    return f"stopped at the cycle's deadline {bound} after {done} of {planned} planned draws"


def span(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
