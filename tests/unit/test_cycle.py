"""The cycle at its seams: a scripted Planner and a scripted Memory, real act, state and checks."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autod.config.settings import load_config
from autod.cycle.limits import CircuitBreaker, Gate
from autod.cycle.phases import Cycle, CycleDeps
from autod.errors import ContextTooLong, LLMUnavailable, PlanInvalid
from autod.events import Event, EventKind
from autod.memory import Recalled, Tier
from autod.modes import ModeEnv
from autod.modes.debug import DebugMode
from autod.ownwrites import OwnWrites
from autod.plan import Edit, Plan
from autod.planner import PlanResult, TokenUsage
from autod.stores.state import State

BUGGY = "def add(a, b):\n    return a - b\n"
CHECK = (
    f"{sys.executable} -c \"import sys; sys.path.insert(0, 'src');"
    " from calc import add; assert add(2, 3) == 5\""
)
FIX = Plan(summary="add must add", edits=[Edit(path="src/calc.py", search="a - b", replace="a + b")])
WRONG = Plan(summary="multiply", edits=[Edit(path="src/calc.py", search="a - b", replace="a * b")])


class ScriptedPlanner:
    def __init__(self, *results: Plan | Exception) -> None:
        self.results = list(results)
        self.requests: list[Any] = []

    async def plan(self, request: Any) -> PlanResult:
        self.requests.append(request)
        r = self.results.pop(0)
        if isinstance(r, Exception):
            raise r
        return PlanResult(r, TokenUsage(100, 20))


class ScriptedMemory:
    def __init__(self) -> None:
        self.lessons: list[tuple[str, bool]] = []
        self.episodes: list[str] = []
        self.observations: list[str] = []

    async def observe(self, text: str, metadata: dict[str, Any]) -> str:
        self.observations.append(text)
        return "n0-1"

    async def add_episode(self, text: str, metadata: dict[str, Any], *, defer: bool = False) -> str:
        self.episodes.append(text)
        return "n1-1"

    async def add_lesson(
        self, text: str, metadata: dict[str, Any], *, success: bool, defer: bool = False
    ) -> str:
        self.lessons.append((text, success))
        return "n2-1"

    async def recall(self, query: str, *, budget_tokens: int, k: int = 8) -> list[Recalled]:
        return [Recalled(f"n2-{i}", Tier.N2, t, 0.9) for i, (t, _) in enumerate(self.lessons)]

    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]:
        return []

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "src").mkdir(parents=True)
    (tmp_path / "ws" / "src" / "calc.py").write_text(BUGGY)
    return tmp_path / "ws"


def make(ws: Path, planner: ScriptedPlanner, *, memory: ScriptedMemory | None = None, **cfg: Any):
    doc = {
        "workspace": str(ws),
        "checks": {"calc": {"run": CHECK, "timeout_s": 30}},
        "limits": {"min_interval_s": 0, **cfg.pop("limits", {})},
        # one plan per attempt unless a test draws several: the scripts below are attempt by attempt
        "candidates": {"n": 1, **cfg.pop("candidates", {})},
        **cfg,
    }
    path = ws.parent / "autod.yaml"
    path.write_text(yaml.safe_dump(doc))
    settings = load_config(path)
    state = State(settings.state_path / "state.db")
    breaker = CircuitBreaker(2, 60)

    async def run_check(name: str):
        from autod.checks.run import run_check as rc

        return await rc(name, settings.checks[name], settings.workspace, settings=settings)

    env = ModeEnv(settings=settings, state=state, memory=memory, run_check=run_check)
    deps = CycleDeps(
        env=env,
        gate=Gate(settings.limits, state, breaker),
        planner=planner,
        planner_name="llm",
        own_writes=OwnWrites(),
        breaker=breaker,
    )
    return deps, state


def failing_event() -> Event:
    return Event(
        source="check:calc",
        kind=EventKind.CHECK_FAILED,
        summary="check calc failed",
        fingerprint="fp-calc",
        payload={"check": "calc", "excerpt": "AssertionError", "failures": 1},
    )


def run(deps: CycleDeps, event: Event | None = None) -> Any:
    return asyncio.run(Cycle(deps, DebugMode(), event or failing_event()).run())


@pytest.mark.slow
def test_a_fix_that_passes_the_check_is_kept_and_recorded(ws):
    mem = ScriptedMemory()
    deps, state = make(ws, ScriptedPlanner(FIX), memory=mem)
    r = run(deps)
    assert r.status == "fixed" and r.edits == [{"path": "src/calc.py", "added": 1, "removed": 1}]
    assert (ws / "src" / "calc.py").read_text() == BUGGY.replace("a - b", "a + b")
    assert r.tokens == {"prompt": 100, "completion": 20}
    assert mem.lessons and mem.lessons[0][1] is True and "worked" in mem.lessons[0][0]
    assert state.history(1)[0]["status"] == "fixed"
    assert not list((deps.env.settings.state_path / "journal").iterdir())


@pytest.mark.slow
def test_a_wrong_fix_is_rolled_back_and_the_replan_sees_it(ws):
    other = Plan(summary="swap", edits=[Edit(path="src/calc.py", search="a - b", replace="b - a")])
    planner = ScriptedPlanner(WRONG, other)
    deps, _state = make(ws, planner)
    r = run(deps)
    assert r.status == "rolled_back" and r.attempts == 2
    assert (ws / "src" / "calc.py").read_text() == BUGGY
    second = planner.requests[1].messages[1]["content"]
    assert "multiply" in second and "a * b" in second
    # the next cycle for this fingerprint starts with the failed attempt in its prompt
    planner.results.append(FIX)
    r2 = run(deps)
    assert r2.status == "fixed" and "b - a" in planner.requests[2].messages[1]["content"]


@pytest.mark.slow
def test_the_fingerprint_is_quarantined_after_max_attempts(ws):
    deps, _state = make(
        ws,
        ScriptedPlanner(WRONG, WRONG),
        limits={"max_attempts_per_fingerprint": 2},
        modes={"auto-debug": {"max_attempts_per_cycle": 1}},
    )
    assert run(deps).quarantined is False
    r = run(deps)
    assert r.quarantined is True
    assert deps.gate.admit(failing_event(), uses_llm=True).drop


@pytest.mark.slow
def test_an_unreachable_llm_fails_the_cycle_and_opens_the_breaker(ws):
    deps, state = make(ws, ScriptedPlanner(LLMUnavailable("deadline exceeded"), LLMUnavailable("refused")))
    r1, r2 = run(deps), run(deps)
    assert (r1.status, r1.reason) == ("failed", "deadline exceeded")
    assert (r2.status, r2.reason) == ("failed", "refused")
    assert deps.breaker is not None and deps.breaker.state == "open"
    assert [h["status"] for h in state.history(5)] == ["failed", "failed"]
    assert (ws / "src" / "calc.py").read_text() == BUGGY


def test_a_reply_the_model_got_wrong_is_not_an_outage_and_the_next_request_varies(ws):
    planner = ScriptedPlanner(PlanInvalid("invalid JSON: bad escape"), PlanInvalid("edits.0: field required"))
    deps, _state = make(ws, planner)
    r = run(deps)
    assert r.status == "rejected" and "no valid plan" in (r.reason or "")
    assert deps.breaker is not None and deps.breaker.state == "closed"  # the server answered
    assert [c["outcome"] for c in r.candidates] == ["invalid", "invalid"]
    first, second = planner.requests
    assert first.seed != second.seed  # never the same question twice
    assert "not a valid JSON plan: invalid JSON" in second.messages[-1]["content"]  # told what was wrong
    assert (ws / "src" / "calc.py").read_text() == BUGGY


@pytest.mark.slow
def test_a_crash_inside_the_planner_is_recorded_and_nothing_written(ws):
    deps, state = make(ws, ScriptedPlanner(RuntimeError("bug")))
    r = run(deps)
    assert r.status == "failed" and r.reason == "internal error: RuntimeError"
    assert state.history(1)[0]["status"] == "failed"


@pytest.mark.slow
def test_require_confirmation_stores_a_proposal_and_writes_nothing(ws):
    deps, state = make(ws, ScriptedPlanner(FIX), limits={"require_confirmation": True})
    r = run(deps)
    assert r.status == "pending_approval" and r.proposal_id
    (p,) = state.proposals("pending")
    assert "-    return a - b" in p["diff"] and "+    return a + b" in p["diff"]
    assert (ws / "src" / "calc.py").read_text() == BUGGY
    approved = asyncio.run(
        Cycle(deps, DebugMode(), failing_event(), approved=Plan.model_validate_json(p["plan"])).run()
    )
    assert approved.status == "fixed" and approved.planner == "operator-approved"


def test_a_stop_during_verification_rolls_back(ws, tmp_path):
    slow = f'{sys.executable} -c "import time; time.sleep(30)"'
    deps, state = make(ws, ScriptedPlanner(FIX), checks={"calc": {"run": slow, "timeout_s": 60}})

    async def main() -> Any:
        cycle = Cycle(deps, DebugMode(), failing_event())
        task = asyncio.create_task(cycle.run())
        for _ in range(200):
            await asyncio.sleep(0.05)
            if (ws / "src" / "calc.py").read_text() != BUGGY:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return cycle.r

    r = asyncio.run(main())
    assert r.status == "failed" and "stopped" in r.reason
    assert (ws / "src" / "calc.py").read_text() == BUGGY
    assert state.history(1)[0]["status"] == "failed"


@pytest.mark.slow
def test_a_replan_that_repeats_a_failed_candidate_is_never_applied_twice(ws):
    """The same change (whitespace aside: compared by AST) is a duplicate, not a second try."""
    again = [Edit(path="src/calc.py", search="a - b\n", replace="a  *  b\n")]
    same = WRONG.model_copy(update={"summary": "multiply, again", "edits": again})
    planner = ScriptedPlanner(WRONG, same)
    applied: list[str] = []
    deps, _state = make(ws, planner)
    run_check = deps.env.run_check

    async def counting(name: str):
        applied.append((ws / "src" / "calc.py").read_text())
        return await run_check(name)

    deps.env.run_check = counting
    r = run(deps)
    assert len(planner.requests) == 2 and r.attempts == 2
    assert applied == [BUGGY.replace("a - b", "a * b")]  # verified once: the repeat was never written
    assert [c["outcome"] for c in r.candidates] == ["rolled_back", "duplicate"]
    assert r.candidates[0]["votes"] == 2
    assert r.status == "rolled_back" and "repeated a candidate" in (r.reason or "")
    assert (ws / "src" / "calc.py").read_text() == BUGGY


@pytest.mark.slow
def test_a_refused_plan_is_replanned_with_the_reason(ws):
    missing = Plan(summary="guess", edits=[Edit(path="src/calc.py", search="not in the file", replace="x")])
    planner = ScriptedPlanner(missing, FIX)
    deps, _state = make(ws, planner)
    r = run(deps)
    assert r.status == "fixed" and r.attempts == 2
    assert "search text not found" in planner.requests[1].messages[1]["content"]


@pytest.mark.slow
def test_a_rollback_that_leaves_an_operators_save_says_so_and_stops_replanning(ws, capsys):
    from autod.cli import main as cli

    # the operator saves src/calc.py while the check verifying autod's edit runs (and it fails)
    saves = (
        f"{sys.executable} -c \"open('src/calc.py', 'w')"
        ".write('def add(a, b):\\n    return b + a  # mine\\n'); raise SystemExit(1)\""
    )
    planner = ScriptedPlanner(FIX, FIX)
    deps, state = make(ws, planner, checks={"calc": {"run": saves, "timeout_s": 30}})
    r = run(deps)
    assert r.status == "partly_rolled_back" and r.attempts == 1 and len(planner.requests) == 1
    assert r.rollback == {"restored": [], "left": ["src/calc.py"]}
    assert "rollback left src/calc.py: changed by someone else" in r.reason
    assert (ws / "src" / "calc.py").read_text() == "def add(a, b):\n    return b + a  # mine\n"
    (row,) = state.history(1)
    assert row["status"] == "partly_rolled_back" and row["rollback"]["left"] == ["src/calc.py"]
    assert cli.main(["history", "-c", str(ws.parent / "autod.yaml")]) == 0
    assert "LEFT=src/calc.py" in capsys.readouterr().out


@pytest.mark.slow
def test_a_verification_check_that_edits_the_workspace_fails_the_verification(ws):
    # its edits are in no journal: the cycle must not be kept as if its own edits made the checks pass
    # (no git in this workspace: a Python file the check writes is source, autod.checks.sourcefiles)
    tidy = f"{sys.executable} -c \"open('src/tidied.py', 'a').write('# tidied')\""
    planner = ScriptedPlanner(Plan(summary=FIX.summary, edits=FIX.edits, verify=["calc", "tidy"]))
    deps, state = make(
        ws,
        planner,
        checks={"calc": {"run": CHECK, "timeout_s": 30}, "tidy": {"run": tidy, "timeout_s": 30}},
        modes={"auto-debug": {"max_attempts_per_cycle": 1}},
    )
    r = run(deps)
    assert r.status == "rolled_back" and "tidy changed source files" in r.reason, r.reason
    assert "src/tidied.py" in r.reason
    assert (ws / "src" / "calc.py").read_text() == BUGGY  # autod's own edit went back
    state.close()


@pytest.mark.slow
def test_a_prompt_over_the_context_window_is_asked_once_more_with_less_context(ws):
    planner = ScriptedPlanner(ContextTooLong("the prompt does not fit", limit=100, prompt_tokens=400), FIX)
    deps, _state = make(ws, planner)
    event = failing_event()
    event.payload["locations"] = [{"path": "src/calc.py", "line": 2}]
    r = run(deps, event)
    assert r.status == "fixed"
    first, second = ("".join(m["content"] for m in q.messages) for q in planner.requests)
    # the source window ranks below the failure excerpt: it is what the smaller budget cut
    assert "return a - b" in first and "return a - b" not in second
    assert deps.breaker is not None and deps.breaker.state == "closed"


def test_a_prompt_that_still_does_not_fit_fails_the_cycle_naming_the_context_not_an_outage(ws):
    too_long = ContextTooLong("the prompt does not fit the model's context")
    deps, _state = make(ws, ScriptedPlanner(too_long, too_long, too_long, too_long))
    r1, r2 = run(deps), run(deps)
    assert (r1.status, r1.reason) == ("failed", "the prompt does not fit the model's context")
    assert r2.status == "failed"
    assert deps.breaker is not None and deps.breaker.state == "closed"  # two failures open it otherwise
    assert (ws / "src" / "calc.py").read_text() == BUGGY


@pytest.mark.slow
def test_tokens_spent_on_a_plan_that_failed_are_booked(ws):
    invalid = PlanInvalid("invalid plan after a repair round")
    invalid.tokens = {"prompt": 650, "completion": 70}
    deps, _state = make(ws, ScriptedPlanner(invalid))
    r = run(deps)
    assert r.status == "failed" and r.tokens == {"prompt": 650, "completion": 70}
    assert deps.gate.counters()["tokens_today"]["used"] == 720  # the daily budget sees them


@pytest.mark.slow
def test_a_rewrite_that_changes_nothing_is_said_so_and_replanned(ws):
    same = Plan(summary="rewrite add", edits=[Edit(path="src/calc.py", symbol="add",
                                                    replace="def add(a, b):\n    return a - b\n")])
    planner = ScriptedPlanner(same, FIX)
    deps, _state = make(ws, planner)
    r = run(deps)
    assert r.status == "fixed" and r.attempts == 2
    assert [c["outcome"] for c in r.candidates] == ["unchanged", "fixed"]
    assert "the edit of add changed nothing" in planner.requests[1].messages[1]["content"]


def test_a_plan_with_no_edits_but_a_report_is_reported_and_teaches_no_lesson(ws):
    memory = ScriptedMemory()
    report = Plan(summary="no fixer to run", edits=[], report="reported only")
    deps, _state = make(ws, ScriptedPlanner(report), memory=memory)
    r = run(deps)
    assert r.status == "reported" and r.lesson is None
    assert memory.lessons == []


@pytest.mark.slow
def test_the_record_says_where_the_time_went(ws):
    deps, _state = make(ws, ScriptedPlanner(FIX))
    r = run(deps)
    t = r.timing
    assert r.status == "fixed" and t["checks_ms"] > 0 and t["model_ms"] == 0  # a scripted planner
    assert t["wall_ms"] >= t["checks_ms"] and t["autod_ms"] == t["wall_ms"] - t["checks_ms"]


@pytest.mark.slow
def test_a_reflect_that_fails_is_a_warning_naming_the_cycle_not_silence(ws):
    import structlog.testing

    deps, _state = make(ws, ScriptedPlanner(FIX))

    def book(**_: int) -> None:
        raise RuntimeError("state db is gone")

    deps.gate.book = book  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        r = run(deps)  # the cycle still ends (the daemon lives on) ...
    lost = [e for e in logs if e["event"] == "cycle.reflect_failed"]
    # ... but its lost record, attempt count and token booking leave a line that says which cycle
    assert len(lost) == 1 and lost[0]["log_level"] == "warning"
    assert lost[0]["cycle_id"] == r.cycle_id and lost[0]["error"] == "RuntimeError: state db is gone"
