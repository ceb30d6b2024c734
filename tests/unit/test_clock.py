"""A cycle's draws against the clock (autod.candidates.clock): progress for a person, and the deadline
that stops drawing with a clear end and nothing half-applied."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest
from test_candidates import Drawer, Judge, search, whole

from autod.candidates.attempts import Tried, run_attempts
from autod.candidates.clock import cycle_deadline, deadline_note, progress
from autod.config.settings import CandidatesConfig
from autod.reflection import Reflection


@dataclass
class Drawn:
    model_ms: int
    checks_ms: int = 0
    part: bool = False


def test_progress_counts_draws_not_parts_and_estimates_the_rest_at_the_mean_cost():
    p = progress([Drawn(60_000, 10_000), Drawn(120_000, 20_000), Drawn(0, 5_000, part=True)], 3, 1000.0,
                 now=400.0)
    assert (p.done, p.planned, p.model_s, p.checks_s, p.eta_s, p.deadline_in_s) == (2, 5, 180.0, 35.0,
                                                                                   322.5, 600.0)
    assert p.line() == "draw 2 of 5, model time 3m00s, about 5m22s left, deadline in 10m00s"
    assert progress([], 4, None).line() == "draw 0 of 4, model time 0s"
    assert p.as_dict()["eta_s"] == 322


def test_the_deadline_is_minutes_from_the_cycle_start_and_0_is_no_bound():
    assert cycle_deadline(CandidatesConfig(max_cycle_minutes=2.5), 100.0) == 250.0
    assert cycle_deadline(CandidatesConfig(), 100.0) is None
    assert "deadline (2.5 min, candidates.max_cycle_minutes) after 1 of 4" in deadline_note(2.5, 1, 4)
    assert deadline_note(2.5, 1, 4, 0.2) == deadline_note(2.5, 1, 4)  # at the deadline: no time left
    assert deadline_note(2.5, 1, 4, 95) == ("stopped before the cycle's deadline (2.5 min, "
                                            "candidates.max_cycle_minutes): no draw left would finish in "
                                            "the 1m35s left, after 1 of 4 planned draws")


class Hanging(Drawer):
    """Answers its plans, then never answers again (a model generating for ever)."""

    async def ask(self, **kw: Any) -> Any:
        if not self.plans:
            self.asked.append(kw)
            await asyncio.Event().wait()
        return await super().ask(**kw)


class Tree:
    """The cycle's act phase as the attempt loop sees it: one callable (it records what it was given)."""

    def __init__(self) -> None:
        self.acted: list[Any] = []

    async def __call__(self, plan: Any, *, hold: str = "") -> Any:
        self.acted.append(plan)


def record() -> Reflection:
    return Reflection(cycle_id="c", event_id="e", mode="auto-debug", fingerprint="f", kind="check_failed",
                      summary="s")


@pytest.mark.slow
def test_past_the_deadline_the_draw_in_flight_is_dropped_and_the_cycle_ends_naming_it(tmp_path):
    drawer = Hanging(whole("return a * b"))
    s = search(tmp_path, drawer, Judge({}), n=3, max_cycle_minutes=1)
    s.deadline = time.monotonic() + 2  # the cycle started 58 s ago
    r, tree = record(), Tree()
    asyncio.run(run_attempts(s, 3, r=r, tried=Tried(), into_tree=tree))
    assert len(drawer.asked) == 2 and r.attempts == 1  # no second attempt past the deadline
    assert [c.outcome for c in s.all] == ["rolled_back"] and tree.acted == []
    assert r.status == "rolled_back"
    assert "stopped at the cycle's deadline (1 min, candidates.max_cycle_minutes) after 1 of 3" in (
        r.reason or "")


def test_a_cycle_past_its_deadline_before_any_draw_fails_with_the_deadline_as_its_reason(tmp_path):
    drawer = Drawer(whole("return a + b"))
    s = search(tmp_path, drawer, Judge({"a + b": "fixed"}), n=2, max_cycle_minutes=0.5)
    s.deadline = time.monotonic() - 1
    r = record()
    asyncio.run(run_attempts(s, 2, r=r, tried=Tried(), into_tree=Tree()))
    assert drawer.asked == [] and r.status == "failed"
    assert r.reason.startswith("stopped at the cycle's deadline (0.5 min")
