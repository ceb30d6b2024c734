"""Localization inside the cycle: the need round, the record's `context`, and focus verification."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autod.config.settings import load_config
from autod.cycle.limits import CircuitBreaker, Gate
from autod.cycle.phases import Cycle, CycleDeps
from autod.events import Event, EventKind
from autod.modes import ModeEnv
from autod.modes.debug import ECHO_STOPS, DebugMode
from autod.ownwrites import OwnWrites
from autod.plan import Edit, Plan
from autod.planner import PlanResult, TokenUsage
from autod.stores.state import State

CALC = 'SCALE = 1\n\n\ndef add(a, b):\n    """Add two numbers."""\n    return (a - b) * SCALE\n'
OTHER = "def unrelated():\n    return 42\n"
CHECK = (
    f"{sys.executable} -c \"import sys; sys.path.insert(0, 'src');"
    " from calc import add; assert add(2, 3) == 5\""
)
FIX = Plan(summary="add must add", edits=[Edit(path="src/calc.py", search="(a - b)", replace="(a + b)")])
OUTPUT = 'Traceback (most recent call last):\n  File "src/calc.py", line 6, in add\nAssertionError\n'


class ScriptedPlanner:
    def __init__(self, *plans: Plan) -> None:
        self.plans = list(plans)
        self.requests: list[Any] = []

    async def plan(self, request: Any) -> PlanResult:
        self.requests.append(request)
        return PlanResult(self.plans.pop(0), TokenUsage(10, 5))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "src").mkdir(parents=True)
    (tmp_path / "ws" / "src" / "calc.py").write_text(CALC)
    (tmp_path / "ws" / "src" / "other.py").write_text(OTHER)
    (tmp_path / "ws" / ".env").write_text("def secret_token():\n    return 'hunter2'\n")
    return tmp_path / "ws"


def make(ws: Path, planner: ScriptedPlanner, checks: dict[str, Any] | None = None,
         candidates: dict[str, Any] | None = None, planner_name: str = "llm", **debug: Any):
    doc = {"workspace": str(ws), "checks": checks or {"calc": {"run": CHECK, "timeout_s": 30}},
           "limits": {"min_interval_s": 0},
           "candidates": candidates or {"n": 1, "focused": 0},  # the wide prompt alone
           "modes": {"auto-debug": {"max_attempts_per_cycle": 1, **debug}}}
    path = ws.parent / "autod.yaml"
    path.write_text(yaml.safe_dump(doc))
    settings = load_config(path)
    state = State(settings.state_path / "state.db")
    ran: list[str] = []

    async def run_check(name: str, *, run: str | None = None, **extra: Any):
        from autod.checks.run import run_check as rc

        check = settings.checks[name]
        ran.append(f"{name}:focus" if run else name)
        if run:
            check = check.model_copy(update={"run": run})
        return await rc(name, check, settings.workspace, **extra)

    env = ModeEnv(settings=settings, state=state, memory=None, run_check=run_check)
    breaker = CircuitBreaker(3, 60)
    deps = CycleDeps(env=env, gate=Gate(settings.limits, state, breaker), planner=planner,
                     planner_name=planner_name, own_writes=OwnWrites(), breaker=breaker)
    return deps, ran


def event() -> Event:
    return Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                 fingerprint="fp", payload={"check": "calc", "excerpt": OUTPUT, "failures": 1})


def run(deps: CycleDeps, ev: Event | None = None, mode: DebugMode | None = None) -> Any:
    return asyncio.run(Cycle(deps, mode or DebugMode(), ev or event()).run())


def test_a_plan_may_ask_once_for_definitions_and_the_second_request_has_them(ws):
    ask = Plan(summary="need to see more", need=["src/other.py::unrelated", "SCALE", ".env::secret_token",
                                                 "../outside.py::x"])
    again = Plan(summary="still curious", need=["unrelated"])
    planner = ScriptedPlanner(ask, again)
    deps, _ = make(ws, planner)
    r = run(deps)
    assert len(planner.requests) == 2  # asked once, answered once: a second `need` is not answered
    second = json.dumps(planner.requests[1].messages)
    assert "def unrelated():" in second and "SCALE = 1" in second
    assert "hunter2" not in second and "secret_token():" not in second
    assert ".env::secret_token: not found" in second and "../outside.py::x: not found" in second
    assert planner.requests[1].messages[-2]["role"] == "assistant"
    assert r.status == "no_change"
    # the record names what went into the prompts: localization's pieces and the answered need
    whys = {(c["path"], c["symbol"], c["why"]) for c in r.context}
    assert ("src/calc.py", "add", "where the error was raised") in whys
    assert ("src/other.py", "unrelated", "asked for by the plan") in whys
    assert not any(c["path"] == ".env" for c in r.context)


@pytest.mark.slow
def test_the_code_reply_form_is_asked_for_and_its_need_round_stays_in_that_form(ws):
    """llm.reply_form: code (the default): the request says so (the planner reads it back that way),
    the prompt asks for a header and a fenced block instead of JSON, and the need round stays in it."""
    planner = ScriptedPlanner(Plan(summary="show me", need=["unrelated"]), FIX)
    deps, _ = make(ws, planner)
    r = run(deps)
    assert r.status == "fixed"
    first, second = planner.requests
    assert first.form == second.form == "code"
    system, user = first.messages[0]["content"], first.messages[1]["content"]
    assert "### <path of a file shown below> · <name of a definition shown below>" in system
    assert "JSON" not in system and "JSON" not in user
    assert user.rstrip().endswith("the header line and the complete definition in a ```python block.")
    # the request stops where a copy of the prompt would begin: at the prompt's own section titles
    assert first.stop == ECHO_STOPS and all(title in user for title in ECHO_STOPS)
    echo, answer = second.messages[-2:]
    assert echo == {"role": "assistant", "content": "show me\nNEED: unrelated"}
    assert "def unrelated():" in answer["content"] and "NEED is not answered again" in answer["content"]
    assert "JSON" not in answer["content"]
    # llm.reply_form: json asks for the JSON plan (the schema's form), with no stop sequences
    planner = ScriptedPlanner(FIX)
    deps, _ = make(ws, planner)
    run(deps, mode=DebugMode(reply_form="json"))
    assert planner.requests[0].stop == ()
    assert planner.requests[0].form == "json" and "Reply with the JSON plan only." in json.dumps(
        planner.requests[0].messages)
    with pytest.raises(ValueError, match="unknown reply form"):
        DebugMode(reply_form="yaml")


@pytest.mark.slow
def test_a_plan_may_name_only_the_files_it_was_shown_and_may_edit(ws):
    """The planner gets the shown files less the judges and the denied ones (the schema's path enum);
    a need answer adds the files it showed. With judge edits allowed, the failing test is in too."""
    (ws / "tests").mkdir()
    (ws / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    output = (
        'Traceback (most recent call last):\n  File "tests/test_calc.py", line 5, in test_add\n'
        '    assert add(2, 3) == 5\n  File "src/calc.py", line 6, in add\n  File ".env", line 2\n'
        "AssertionError\nFAILED tests/test_calc.py::test_add - AssertionError\n"
    )
    failing = Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                    fingerprint="fp", payload={"check": "calc", "excerpt": output, "failures": 1})
    ask = Plan(summary="show me", need=["src/other.py::unrelated", ".env::secret_token"])
    planner = ScriptedPlanner(ask, FIX)
    deps, _ = make(ws, planner)
    r = run(deps, failing)
    assert r.status == "fixed"
    first, second = planner.requests
    assert "def test_add():" in first.messages[1]["content"]  # shown, to read: not to edit
    assert first.paths == ("src/calc.py",)
    assert second.paths == ("src/calc.py", "src/other.py")

    planner = ScriptedPlanner(Plan(summary="nothing", edits=[]))
    deps, _ = make(ws, planner, allow_judge_edits=True)
    run(deps, failing)
    assert planner.requests[0].paths == ("src/calc.py", "tests/test_calc.py")


@pytest.mark.slow
def test_the_first_prompt_holds_the_whole_function_without_a_gutter(ws):
    planner = ScriptedPlanner(FIX)
    deps, _ = make(ws, planner)
    r = run(deps)
    assert r.status == "fixed"
    user = planner.requests[0].messages[1]["content"]
    assert 'def add(a, b):\n    """Add two numbers."""\n    return (a - b) * SCALE\n' in user
    assert "SCALE = 1" in user and "def unrelated" not in user


@pytest.mark.slow
def test_the_first_plans_are_drawn_from_the_focused_view_then_from_the_whole_context(ws):
    """The focused view (the failure and the top suspect alone, asked for its fixed source) goes first;
    when its plans do not fix the failure, the wide prompt (constants, outline, memory) is sent."""
    planner = ScriptedPlanner(Plan(summary="no idea", edits=[]), Plan(summary="no idea", edits=[]), FIX)
    deps, _ = make(ws, planner, candidates={"n": 2, "focused": 1, "isolation": "off"})
    r = run(deps)
    assert r.status == "fixed"
    focused, value, wide = (req.messages[1]["content"] for req in planner.requests)
    assert 'def add(a, b):\n    """Add two numbers."""\n    return (a - b) * SCALE\n' in focused
    assert "The bug is most likely in this definition, `add` in `src/calc.py`" in focused
    # the value it reads is shown with it, and a plan drawn from it may rewrite either
    assert "It reads these values:\n\n```python\n# SCALE\nSCALE = 1\n```" in focused
    assert "or, if the bug is in a value it reads, that value's fixed assignment alone" in focused
    assert "SCALE = 1" in wide and "def unrelated" not in focused
    assert planner.requests[0].symbols == {"src/calc.py": ("add", "SCALE")}
    # then the value alone, as a suspect of its own: a plan drawn from it may rewrite that value only
    assert ("The bug is most likely in this value, `SCALE` in `src/calc.py`, which `add` reads:\n\n"
            "```python\nSCALE = 1\n```\n\nWrite the fixed assignment of `SCALE` alone.") in value
    assert "def add" not in value and "def unrelated" not in value
    assert planner.requests[1].symbols == {"src/calc.py": ("SCALE",)}
    assert [c["view"] for c in r.candidates] == ["focused:1", "value:1", "wide"]
    # each prompt's first draw: temperature 0, the configured seed
    assert [(req.temperature, req.seed) for req in planner.requests] == [(0.0, 1), (0.0, 1), (0.0, 1)]


def test_the_cycle_draws_in_the_plan_made_from_its_own_prompts_sizes(ws, monkeypatch):
    """The asker tells the search what each draw would cost (its suspects', value groups' and wide
    prompt's tokens), and the draws follow autod.candidates.order's plan for those sizes."""
    from autod.candidates import order

    planned: list[tuple[order.Sizes, list[tuple[str, bool]]]] = []
    real = order.plan

    def plan(sizes: order.Sizes, per: int, wide_n: int) -> list[tuple[str, bool]]:
        planned.append((sizes, real(sizes, per, wide_n)))
        return planned[-1][1]

    monkeypatch.setattr(order, "plan", plan)
    wrong = [Plan(summary="wrong", edits=[Edit(path="src/calc.py", search="(a - b)",
                                               replace=f"(a - b + {k})")]) for k in range(1, 4)]
    planner = ScriptedPlanner(*wrong, FIX)
    deps, _ = make(ws, planner, candidates={"n": 2, "focused": 2, "isolation": "off"})
    r = run(deps)
    assert len(planned) == 1
    sizes, looks = planned[0]
    # one suspect (`add`, ~30 tokens with the value it reads), one value group, a wide prompt of some
    # hundreds of tokens: each estimated from its own text
    assert len(sizes.suspects) == 1 and 10 < sizes.suspects[0][0] < sizes.suspects[0][1] < 100
    assert len(sizes.values) == 1 and 0 < sizes.values[0] < 20 and sizes.wide > 100
    views = [c["view"] for c in r.candidates]
    assert r.status == "fixed" and len(views) == 4 and views == [v for v, _ in looks][:4]


@pytest.mark.slow
def test_a_suspect_prompt_asks_for_no_definition_and_a_need_there_spends_no_need_round(ws):
    """A focused draw shows one definition and asks for its fixed source: a `need` in its reply is not
    answered (no request spent on it) and the wide draw after it still has the need round."""
    ask = Plan(summary="need more", need=["src/other.py::unrelated"])
    planner = ScriptedPlanner(ask, ask, Plan(summary="show me", need=["unrelated"]), FIX)
    deps, _ = make(ws, planner, candidates={"n": 1, "focused": 1, "isolation": "off"})
    r = run(deps)
    assert r.status == "fixed"
    suspect, value, wide, answered = (req.messages for req in planner.requests)
    assert "NEED:" not in json.dumps(suspect + value) and "NEED:" in json.dumps(wide)
    assert "def unrelated():" in json.dumps(answered) and "def unrelated():" not in json.dumps(wide)
    assert [c["view"] for c in r.candidates] == ["focused:1", "value:1", "wide"]


@pytest.mark.slow
def test_a_suspect_draw_goes_through_the_act_rules_like_any_other(ws):
    """A suspect's prompt names one definition, but what its plan writes is judged as ever: a file
    that would run code later (a `.pth`), a test, a path outside: refused, never written."""
    hostile = Plan(summary="also this", edits=[
        Edit(path="src/calc.py", search="(a - b)", replace="(a + b)"),
        Edit(path="src/evil.pth", search="", replace="import os; os.system('id')\n"),
    ])
    escape = Plan(summary="and this", edits=[Edit(path="../outside.py", search="", replace="x = 1\n")])
    planner = ScriptedPlanner(hostile, escape, FIX)
    deps, _ = make(ws, planner, candidates={"n": 1, "focused": 2, "temperature": 0.5, "isolation": "off"})
    r = run(deps)
    assert r.status == "fixed"
    # the first two draws are narrow ones (a suspect's, then the next in autod.candidates.order)
    first, second = r.candidates[:2]
    assert (first["view"], first["outcome"]) == ("focused:1", "refused")
    assert second["view"] != "wide" and second["outcome"] == "refused"
    assert not (ws / "src" / "evil.pth").exists() and not (ws.parent / "outside.py").exists()


def test_the_offline_planner_is_asked_once_an_attempt_whatever_the_candidates_settings(ws):
    """A deterministic planner (the offline rules: it runs the fixer checks) gives the same plan to
    every request: one request an attempt, from the wide prompt, not n wide and the focused draws."""
    planner = ScriptedPlanner(Plan(summary="fixers changed nothing useful", edits=[]))
    deps, _ = make(ws, planner, candidates={"n": 4, "focused": 4}, planner_name="rules")
    r = run(deps)
    assert r.status == "no_change"
    assert len(planner.requests) == 1 and [c["view"] for c in r.candidates] == ["wide"]


@pytest.mark.slow
def test_a_failing_focus_rolls_back_without_running_the_full_check(ws):
    fail = f"{sys.executable} -c \"raise SystemExit(3)\""
    checks = {"calc": {"run": CHECK, "timeout_s": 30, "focus": fail}}
    deps, ran = make(ws, ScriptedPlanner(FIX), checks)
    r = run(deps)
    assert r.status == "rolled_back" and "focus of check calc failed" in r.reason
    assert ran == ["calc:focus"]
    assert [c["name"] for c in r.checks] == ["calc:focus"] and r.checks[0]["exit_code"] == 3
    assert (ws / "src" / "calc.py").read_text() == CALC


@pytest.mark.slow
def test_a_passing_focus_still_pays_for_the_full_check(ws):
    checks = {"calc": {"run": CHECK, "timeout_s": 30, "focus": f"{sys.executable} -c \"pass\""}}
    deps, ran = make(ws, ScriptedPlanner(FIX), checks)
    r = run(deps)
    assert ran == ["calc:focus", "calc"] and r.status == "fixed"


class Episodes:
    def __init__(self) -> None:
        self.episodes: list[str] = []

    async def observe(self, text: str, metadata: dict[str, Any]) -> str:
        return "n0"

    async def add_episode(self, text: str, metadata: dict[str, Any], *, defer: bool = False) -> str:
        self.episodes.append(text)
        return "n1"

    async def add_lesson(
        self, text: str, metadata: dict[str, Any], *, success: bool, defer: bool = False
    ) -> str:
        return "n2"

    async def recall(self, query: str, *, budget_tokens: int, k: int = 8) -> list[Any]:
        return []

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


@pytest.mark.slow
def test_an_episode_is_stored_as_sentences_and_a_short_diff(ws):
    deps, _ = make(ws, ScriptedPlanner(FIX))
    mem = Episodes()
    deps.env.memory = mem
    assert run(deps).status == "fixed"
    (episode,) = mem.episodes
    assert episode.startswith("Failure: check calc failed. Tried: add must add. Outcome: fixed.")
    assert "-    return (a - b) * SCALE\n+    return (a + b) * SCALE" in episode
    assert '"edits"' not in episode and "{" not in episode


SCALED = "from limits import SCALE\n\n\ndef add(a, b):\n    return (a + b) * SCALE\n"


@pytest.mark.slow
def test_a_bug_in_a_value_the_suspect_reads_is_fixed_from_the_suspects_prompt(ws):
    """The value a suspect reads, in another module, is shown with it and named in the request's
    `symbols`, so a plan drawn there may rewrite it (in the code form, a headerless `SCALE = 1` is
    placed on it: autod.planner.codeform)."""
    (ws / "src" / "calc.py").write_text(SCALED)
    (ws / "src" / "limits.py").write_text('"""Limits."""\n\nSCALE = 2\n')
    fix = Plan(summary="SCALE is wrong",
               edits=[Edit(path="src/limits.py", symbol="SCALE", replace="SCALE = 1")])
    planner = ScriptedPlanner(fix)
    deps, _ = make(ws, planner, candidates={"n": 1, "focused": 1, "isolation": "off"})
    r = run(deps, Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                        fingerprint="fp", payload={"check": "calc", "excerpt": OUTPUT.replace("6", "5"),
                                                   "failures": 1}))
    assert r.status == "fixed", r.reason
    (request,) = planner.requests
    assert request.symbols == {"src/calc.py": ("add",), "src/limits.py": ("SCALE",)}
    assert request.paths == ("src/calc.py", "src/limits.py")
    assert "# SCALE in src/limits.py\nSCALE = 2" in request.messages[1]["content"]
    assert (ws / "src" / "limits.py").read_text() == '"""Limits."""\n\nSCALE = 1\n'


@pytest.mark.slow
def test_a_value_the_suspect_reads_is_asked_about_alone_and_fixed_from_that_prompt(ws):
    """Shown beside the function, the value was left as it was; asked about alone ("the bug is most
    likely in this value"), the plan rewrites it, and only it: that prompt offers no other definition."""
    (ws / "src" / "calc.py").write_text(SCALED)
    (ws / "src" / "limits.py").write_text('"""Limits."""\n\nSCALE = 2\nOTHER = 5\n')
    fix = Plan(summary="SCALE is wrong",
               edits=[Edit(path="src/limits.py", symbol="SCALE", replace="SCALE = 1")])
    planner = ScriptedPlanner(Plan(summary="the function looks right", edits=[]), fix)
    deps, _ = make(ws, planner, candidates={"n": 1, "focused": 1, "isolation": "off"})
    r = run(deps, Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                        fingerprint="fp", payload={"check": "calc", "excerpt": OUTPUT.replace("6", "5"),
                                                   "failures": 1}))
    assert r.status == "fixed", r.reason
    suspect, value = planner.requests
    assert "in this definition, `add`" in suspect.messages[1]["content"]
    assert [c["view"] for c in r.candidates] == ["focused:1", "value:1"]
    assert value.symbols == {"src/limits.py": ("SCALE",)} and value.paths == ("src/limits.py",)
    prompt = value.messages[1]["content"]
    assert "most likely in this value, `SCALE` in `src/limits.py`, which `add` reads" in prompt
    assert "```python\nSCALE = 2\n```" in prompt and "def add" not in prompt and "OTHER" not in prompt
    assert prompt.rstrip().endswith("Write the fixed assignment of `SCALE` alone.")
    assert value.temperature == 0.0
    # the suspect's opening, so a server that kept the suspect's prompt reads only the value's part
    assert value.messages[0] == suspect.messages[0]
    assert (ws / "src" / "limits.py").read_text() == '"""Limits."""\n\nSCALE = 1\nOTHER = 5\n'


@pytest.mark.slow
def test_the_values_a_suspect_reads_are_asked_about_together_and_one_of_them_fixed(ws):
    """Two values read by the suspect: one prompt shows both (each under its name), offers both, and
    the plan that rewrites the wrong one alone fixes the failure; a logger it reads is no question."""
    (ws / "src" / "calc.py").write_text(
        "import logging\n\nfrom limits import OFFSET, SCALE\n\nlog = logging.getLogger(__name__)\n\n\n"
        "def add(a, b):\n    log.debug('add')\n    return (a + b) * SCALE + OFFSET\n")
    (ws / "src" / "limits.py").write_text("SCALE = 1\nOFFSET = 1\n")
    fix = Plan(summary="no offset", edits=[Edit(path="src/limits.py", symbol="OFFSET", replace="OFFSET = 0")])
    planner = ScriptedPlanner(Plan(summary="the function looks right", edits=[]), fix)
    deps, _ = make(ws, planner, candidates={"n": 1, "focused": 1, "isolation": "off"})
    output = 'Traceback (most recent call last):\n  File "src/calc.py", line 10, in add\nAssertionError\n'
    r = run(deps, Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                        fingerprint="fp", payload={"check": "calc", "excerpt": output, "failures": 1}))
    assert r.status == "fixed", r.reason
    _suspect, values = planner.requests
    assert list(values.symbols) == ["src/limits.py"]
    assert sorted(values.symbols["src/limits.py"]) == ["OFFSET", "SCALE"]
    prompt = values.messages[1]["content"]
    # their assignments as the file has them, in one block, with no comment line a reply would copy
    assert ("most likely in one of these values in `src/limits.py`, which `add` reads:\n\n"
            "```python\nOFFSET = 1\nSCALE = 1\n```") in prompt
    assert "# " not in prompt.partition("which `add` reads")[2]
    assert "getLogger" not in prompt and "def add" not in prompt
    assert "Write the fixed assignment of the wrong value alone." in prompt
    assert (ws / "src" / "limits.py").read_text() == "SCALE = 1\nOFFSET = 0\n"


def test_a_value_in_a_judge_is_not_offered_and_an_edit_of_it_is_refused(ws):
    """A value the act rules would not let a plan edit (here a file the operator's judge_globs
    protect) is not shown as fixable: the suspect is asked about alone, and a plan that edits the judge
    anyway is refused and never written."""
    (ws / "src" / "calc.py").write_text(SCALED)
    (ws / "src" / "limits.py").write_text("SCALE = 2\n")
    tamper = Plan(summary="SCALE", edits=[Edit(path="src/limits.py", symbol="SCALE", replace="SCALE = 1")])
    planner = ScriptedPlanner(tamper, Plan(summary="no idea", edits=[]))
    deps, _ = make(ws, planner, candidates={"n": 1, "focused": 1, "isolation": "off"},
                   judge_globs=["tests/**", "src/limits.py"])
    r = run(deps, Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                        fingerprint="fp", payload={"check": "calc", "excerpt": OUTPUT.replace("6", "5"),
                                                   "failures": 1}))
    request = planner.requests[0]
    assert request.symbols == {"src/calc.py": ("add",)} and request.paths == ("src/calc.py",)
    assert "It reads these values" not in request.messages[1]["content"]
    assert r.candidates[0]["outcome"] == "refused" and "src/limits.py" in r.candidates[0]["reason"]
    assert (ws / "src" / "limits.py").read_text() == "SCALE = 2\n"
    # nor is it a value suspect: no prompt asks about it alone
    assert [c["view"] for c in r.candidates] == ["focused:1", "wide"]
    assert not any("in this value" in req.messages[1]["content"] for req in planner.requests)


def test_a_later_cycle_on_the_same_failure_never_sends_a_question_an_earlier_one_asked(ws):
    """A failure still failing after a cycle is tried again later. The suspects' prompts do not tell
    the earlier attempts (nor the wide one, when the earlier cycle changed nothing), so at
    temperature 0, or sampled with the same seed, the model would give the earlier cycle's replies
    again: the later cycle samples every prompt from its first draw, with seeds past the earlier
    cycle's."""
    idle = Plan(summary="no idea", edits=[])
    planner = ScriptedPlanner(*[idle] * 40)
    deps, _ = make(ws, planner, candidates={"n": 2, "focused": 2, "isolation": "off"})
    first = run(deps)
    assert first.status == "no_change"
    asked = len(planner.requests)
    second = run(deps)
    assert second.status == "no_change"

    def question(req: Any) -> tuple[str, float | None, int | None]:
        # a request at temperature 0 is the same question whatever its seed
        return json.dumps(req.messages), req.temperature, req.seed if req.temperature else None

    earlier = {question(q) for q in planner.requests[:asked]}
    later = planner.requests[asked:]
    assert later and not [q for q in later if question(q) in earlier]
    assert 0.0 not in [q.temperature for q in later]


def test_an_offline_cycle_localizes_nothing_and_reruns_no_failing_test_for_a_ranking(ws):
    """The offline planner runs the fixer checks and reads no prompt: nothing is localized (on autod's
    own checkout that was most of such a cycle), and a pytest check is not re-run for a ranking."""
    import dataclasses

    planner = ScriptedPlanner(FIX)
    pytest_check = {"run": f"{sys.executable} -m pytest -q", "timeout_s": 30}
    deps, ran = make(ws, planner, checks={"calc": pytest_check}, planner_name="rules")
    deps = dataclasses.replace(deps, env=dataclasses.replace(deps.env, offline=True))
    context = asyncio.run(DebugMode().context(event(), deps.env, []))
    assert context["sources"] == "" and context.used == [] and context.editable is None
    assert ran == []  # no coverage re-run of the failing tests
    assert "AssertionError" in context["excerpt"]
