"""The record says what really happened, and an outage costs nothing: no hourly slot, no lesson, no
episode, nothing recalled. A real cycle (act, checks, state) with a scripted planner and memory."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from autod.checks import CheckResult
from autod.config import load_config
from autod.cycle import Cycle, CycleDeps
from autod.errors import BudgetExhausted, LLMUnavailable
from autod.events import Event, EventKind
from autod.freshness import CheckLedger, Run
from autod.limits import CircuitBreaker, Gate
from autod.memory import Recalled, Tier
from autod.memory.recall import Hit, rank
from autod.modes import ModeEnv
from autod.modes.debug import DebugMode
from autod.ownwrites import OwnWrites
from autod.plan import Edit, Plan
from autod.planner import PlanResult, TokenUsage
from autod.reflect import Reflection, distil_lesson
from autod.state import State

BUGGY = "def add(a, b):\n    return a - b\n"
CHECK = (
    f"{sys.executable} -c \"import sys; sys.path.insert(0, 'src');"
    " from calc import add; assert add(2, 3) == 5\""
)
WRONG = Plan(summary="multiply", edits=[Edit(path="src/calc.py", search="a - b", replace="a * b")])
NOTHING = Plan(summary="I see nothing to change", edits=[])
MISSING = Plan(summary="guess", edits=[Edit(path="src/calc.py", search="not in the file", replace="x")])


class Planner:
    def __init__(self, *results: Plan | Exception) -> None:
        self.results = list(results)

    async def plan(self, request: Any) -> PlanResult:
        r = self.results.pop(0)
        if isinstance(r, Exception):
            raise r
        return PlanResult(r, TokenUsage(10, 5))


class Memory:
    def __init__(self) -> None:
        self.lessons: list[str] = []
        self.episodes: list[str] = []

    async def observe(self, text: str, metadata: dict[str, Any]) -> str:
        return "n0"

    async def add_episode(self, text: str, metadata: dict[str, Any], *, defer: bool = False) -> str:
        self.episodes.append(text)
        return "n1"

    async def add_lesson(
        self, text: str, metadata: dict[str, Any], *, success: bool, defer: bool = False
    ) -> str:
        self.lessons.append(text)
        return "n2"

    async def recall(self, query: str, *, budget_tokens: int, k: int = 8) -> list[Recalled]:
        return []

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "src").mkdir(parents=True)
    (tmp_path / "ws" / "src" / "calc.py").write_text(BUGGY)
    return tmp_path / "ws"


def make(ws: Path, planner: Planner, memory: Memory, attempts: int = 2) -> tuple[CycleDeps, State]:
    doc = {
        "workspace": str(ws),
        "checks": {"calc": {"run": CHECK, "timeout_s": 30}},
        "modes": {"auto-debug": {"enabled": True, "max_attempts_per_cycle": attempts}},
        "limits": {"min_interval_s": 0, "max_cycles_per_hour": 2},
        "candidates": {"n": 1},  # one plan per attempt: the script is the model's answers in order
    }
    (ws.parent / "autod.yaml").write_text(yaml.safe_dump(doc))
    settings = load_config(ws.parent / "autod.yaml")
    state = State(settings.state_path / "state.db")

    async def run_check(name: str, **_: Any) -> CheckResult:
        from autod.checks import run_check as rc

        return await rc(name, settings.checks[name], settings.workspace, settings=settings)

    breaker = CircuitBreaker(5, 60)
    env = ModeEnv(settings=settings, state=state, memory=memory, run_check=run_check)
    deps = CycleDeps(env=env, gate=Gate(settings.limits, state, breaker), planner=planner, planner_name="llm",
                     own_writes=OwnWrites(), breaker=breaker)
    return deps, state


def event() -> Event:
    return Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                 fingerprint="fp-calc", payload={"check": "calc", "excerpt": "AssertionError", "failures": 1})


def cycle(deps: CycleDeps) -> Cycle:
    c = Cycle(deps, DebugMode(), event())
    asyncio.run(c.run())
    return c


def test_a_replan_that_proposes_nothing_after_a_rollback_leaves_the_cycle_rolled_back(ws):
    memory = Memory()
    deps, _ = make(ws, Planner(WRONG, NOTHING), memory)
    r = cycle(deps).r
    assert r.status == "rolled_back", (r.status, r.reason)
    assert "checks still fail" in r.reason and "then attempt 2: the planner proposed no edits" in r.reason
    (lesson,) = memory.lessons
    assert "rolled back" in lesson and "nothing was changed" not in lesson
    assert (ws / "src" / "calc.py").read_text() == BUGGY


def test_a_refused_plan_after_a_rollback_does_not_turn_the_cycle_into_a_refusal(ws):
    deps, _ = make(ws, Planner(WRONG, MISSING), Memory())
    r = cycle(deps).r
    assert r.status == "rolled_back" and "then attempt 2: search text not found" in r.reason, r.reason
    assert r.refusals and "search text not found" in r.refusals[0]


def test_an_outage_is_external_and_writes_no_lesson_or_episode(ws):
    memory = Memory()
    deps, state = make(ws, Planner(LLMUnavailable("ConnectError: [Errno 111] Connection refused")), memory)
    c = cycle(deps)
    assert c.r.status == "failed" and c.r.external is True and c.r.lesson is None
    assert memory.lessons == [] and memory.episodes == []
    assert state.history(1)[0]["status"] == "failed"


def test_an_outage_after_a_rolled_back_attempt_is_still_a_rollback_that_teaches(ws):
    memory = Memory()
    deps, _ = make(ws, Planner(WRONG, LLMUnavailable("HTTP 503")), memory)
    c = cycle(deps)
    assert c.r.status == "rolled_back" and c.r.external is False and c.error is not None
    assert "then attempt 2: HTTP 503" in c.r.reason
    assert len(memory.lessons) == 1 and len(memory.episodes) == 1


def test_cycles_that_failed_outside_the_repository_do_not_spend_the_hourly_cap(ws):
    deps, state = make(ws, Planner(*[LLMUnavailable("down")] * 3, BudgetExhausted("max_edits_per_day")),
                       Memory())
    for _ in range(4):
        assert cycle(deps).r.external
    gate = deps.gate
    assert state.cycles_since(time.time() - 3600) == 0
    assert gate.admit(event(), uses_llm=True).ok
    assert gate.counters()["cycles_last_hour"]["used"] == 0
    deps.planner = Planner(WRONG, WRONG, WRONG, WRONG)  # two real cycles reach the cap of 2
    deps.env.settings.modes.get("auto-debug").max_attempts_per_cycle = 1
    cycle(deps)
    cycle(deps)
    verdict = gate.admit(event(), uses_llm=True)
    assert not verdict.ok and "max_cycles_per_hour (2/2)" in verdict.reason


def hit(tier: Tier, text: str, **meta: Any) -> Hit:
    return Hit(id=text[:12], tier=tier, text=text, similarity=0.9, metadata={"ts": 0, **meta})


def test_episodes_and_lessons_of_failed_cycles_already_stored_are_not_recalled():
    hits = [
        hit(Tier.N2, "[auto-debug] Failure: x. Tried: no plan. Outcome: the cycle failed (ConnectError).",
            status="failed"),
        hit(Tier.N2, "[auto-debug] Failure: x. Tried: no plan. Outcome: the cycle failed (HTTP 500)."),
        hit(Tier.N1, "Failure: x. Outcome: failed (LLM unavailable: ConnectError).", status="failed"),
        hit(Tier.N2, "[auto-debug] Failure: x. Tried: add. Outcome: it worked: the checks pass.",
            status="fixed"),
        hit(Tier.N0, "check_failed: check calc failed"),
    ]
    kept = [r.text for r in rank(hits, now=0.0)]
    assert kept == [hits[3].text, hits[4].text]


def test_a_lesson_is_never_distilled_from_a_failed_cycle():
    ev = event()
    r = Reflection("c", ev.id, "auto-debug", ev.fingerprint, str(ev.kind), ev.summary, status="failed",
                   reason="stopped: the daemon is shutting down", plan_summary="x")
    assert distil_lesson(r, ev) is None


def test_runs_that_verified_a_rolled_back_attempt_never_count_for_the_kept_one():
    ledger = CheckLedger()
    ledger.record(Run("tests", 100, False, "A"), CheckResult("tests", 1, "", 1))
    ledger.hold()
    ledger.record(Run("lint", 110, True), CheckResult("lint", 0, "", 1))  # attempt 1, then rolled back
    ledger.record(Run("tests", 130, True), CheckResult("tests", 0, "", 1))  # attempt 2, kept
    counted = ledger.release(keep=True, since=120.0)  # autod's last write: attempt 2's edit
    assert [r.check for r in counted] == ["tests"] and ledger.latest("lint") is None
