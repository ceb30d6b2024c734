"""A candidate's check on the mirror gets a deadline from what the check took, never the other way
round: the failing run's and the last passing run's durations, a factor, a floor, the check's cap."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from autod.candidates.validate import InPlace, Isolated, candidate_deadline
from autod.checks.run import CheckResult
from autod.checks.source import failure_event
from autod.config.settings import Settings
from autod.events import Event, EventKind
from autod.modes import ModeEnv
from autod.modes.debug import DebugMode
from autod.runtime.checkbook import PASSING_MS_KEY, CheckBook
from autod.stores.state import State


def test_the_deadline_is_a_multiple_of_what_the_check_took_within_floor_and_cap():
    assert candidate_deadline(600, 2.0, 10, 120) == 120  # the floor: never sooner
    assert candidate_deadline(600, 30.0, 10, 120) == 300
    assert candidate_deadline(600, 90.0, 10, 120) is None  # past the check's own: its own holds
    assert candidate_deadline(100, 1.0, 10, 120) is None  # a floor over the cap: the check's own


class FakeIsolation:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run_check(self, name: str, **extra: Any) -> CheckResult:
        self.calls.append({"name": name, **extra})
        return CheckResult(name, 0, "", 10)


@pytest.fixture
def env(tmp_path: Path):
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / ".state",
                        checks={"tests": {"run": "true", "timeout_s": 900}, "lint": {"run": "true"}},
                        candidates={"check_timeout_factor": 10, "check_timeout_min_s": 60})
    state = State(tmp_path / "state.db")
    yield ModeEnv(settings=settings, state=state, memory=None, run_check=FakeIsolation().run_check)
    state.close()


def isolated(env: ModeEnv, payload: dict[str, Any]) -> tuple[Isolated, FakeIsolation]:
    iso = FakeIsolation()
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="x", fingerprint="fp",
                  payload=payload)

    async def act(plan: Any) -> None:
        return None

    return Isolated(iso, DebugMode(), event, env, InPlace(act)), iso  # type: ignore[arg-type]


def test_a_candidates_run_of_the_failing_check_gets_ten_times_its_failing_run(env):
    v, iso = isolated(env, {"check": "tests", "duration_ms": 12_000})
    with structlog.testing.capture_logs() as logs:
        asyncio.run(v.env.run_check("tests"))
        asyncio.run(v.env.run_check("tests", run="pytest -x tests/test_a.py"))  # its focus: the same
    assert [c.get("timeout_s") for c in iso.calls] == [120.0, 120.0]
    # said once, with the check's own timeout beside it: an operator sees why a run stopped early
    said = [e for e in logs if e["event"] == "candidates.check_deadline"]
    assert [(e["check"], e["timeout_s"], e["check_timeout_s"]) for e in said] == [("tests", 120.0, 900)]


def test_the_last_passing_run_counts_when_it_took_longer_than_the_failing_one(env):
    env.state.set_kv(f"{PASSING_MS_KEY}tests", 40_000)  # `-x` fails fast; a passing run takes 40 s
    v, iso = isolated(env, {"check": "tests", "duration_ms": 2_000})
    asyncio.run(v.env.run_check("tests"))
    assert iso.calls[0]["timeout_s"] == 400.0


def test_without_a_measured_run_or_with_the_factor_off_the_checks_own_timeout_holds(env):
    v, iso = isolated(env, {"check": "tests"})
    asyncio.run(v.env.run_check("lint"))  # another check, never seen passing: nothing measured
    asyncio.run(v.env.run_check("tests"))
    assert [c.get("timeout_s") for c in iso.calls] == [None, None]
    env.settings.candidates.check_timeout_factor = 0
    v, iso = isolated(env, {"check": "tests", "duration_ms": 5_000})
    asyncio.run(v.env.run_check("tests"))
    assert iso.calls[0].get("timeout_s") is None


def test_a_failure_event_carries_its_runs_duration_and_a_pass_is_remembered(tmp_path: Path):
    event = failure_event(CheckResult("tests", 1, "FAILED t.py::test_x - boom", 2_345))
    assert event.payload["duration_ms"] == 2_345
    state = State(tmp_path / "state.db")
    try:
        async def accept(_e: Event) -> None:
            return None

        book = CheckBook(tmp_path, state, accept)
        asyncio.run(book.record(CheckResult("tests", 0, "1 passed", 31_000), 1.0))
        assert state.get_kv(f"{PASSING_MS_KEY}tests") == 31_000
    finally:
        state.close()
