"""The debug mode's context with a digest: the prompt shows it, and the code keeps the room it had."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from test_localize_cycle import ScriptedPlanner, make, ws  # noqa: F401  (ws: the fixture)

from autod.checks.digest import digest
from autod.events import Event, EventKind
from autod.modes import debug as debug_mode
from autod.modes.debug import DebugMode

LISTING = "\n".join(f"        total += {i} * 0" for i in range(400))
REPORT = f"""============================= test session starts ==============================
collected 3 items

tests/test_calc.py FFF                                                   [100%]

=================================== FAILURES ===================================
__________________________________ test_add ____________________________________

    def test_add():
>       assert add(2, 3) == 5

tests/test_calc.py:4:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

a = 2, b = 3

    def add(a, b):
        total = 0
{LISTING}
>       raise AssertionError("add is wrong")
E       AssertionError: add is wrong

src/calc.py:6: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_add - AssertionError: add is wrong
============================== 1 failed in 0.05s ===============================
"""


def _event(with_digest: bool) -> Event:
    payload: dict[str, Any] = {"check": "calc", "excerpt": REPORT[-12000:], "failures": 1}
    if with_digest:
        payload["digest"] = digest(REPORT, 12000)
    return Event(source="check:calc", kind=EventKind.CHECK_FAILED, summary="check calc failed",
                 fingerprint="fp", payload=payload)


@pytest.mark.parametrize("budget", [500, 900, 2000, 6000])
def test_the_prompt_shows_the_digest_and_the_code_keeps_its_room(ws, monkeypatch, budget):  # noqa: F811
    deps, _ = make(ws, ScriptedPlanner())
    cfg = deps.env.settings
    settings = cfg.model_copy(update={"localize": cfg.localize.model_copy(update={"budget_tokens": budget})})
    env = dataclasses.replace(deps.env, settings=settings)
    budgets: list[int] = []
    real = debug_mode.localize

    async def recorded(*args: Any, **kw: Any) -> Any:
        budgets.append(kw["budget_tokens"])
        return await real(*args, **kw)

    monkeypatch.setattr(debug_mode, "localize", recorded)
    raw = asyncio.run(DebugMode().context(_event(False), env, []))
    digested = asyncio.run(DebugMode().context(_event(True), env, []))
    assert budgets[0] == budgets[1]  # the code's room is what the raw output left it
    assert raw["sources"] == digested["sources"]
    assert len(digested["excerpt"]) <= len(raw["excerpt"])
    assert "total += 7 * 0" not in digested["excerpt"]
    if budget >= 2000:  # room for the failure's lines at all
        assert "total += 7 * 0" in raw["excerpt"]
        assert ">       raise AssertionError(\"add is wrong\")" in digested["excerpt"]


def test_each_suspect_says_how_many_of_its_lines_a_reply_is_given(ws):  # noqa: F811
    """The head (decorators, signature, docstring) a reply is begun with (autod.planner.prefill) is not
    written by the model: autod.candidates.fits prices a draw's seconds without it."""
    from autod.planner.prefill import head

    deps, _ = make(ws, ScriptedPlanner())
    out = asyncio.run(DebugMode().context(_event(True), deps.env, []))
    suspects = [f for f in out.focused or [] if not f.get("read_by")]
    assert suspects
    for f in suspects:
        given = head(f["code"])
        assert f["head_lines"] == str(len(given.split("\n")) if given else 0), f["symbol"]
        assert given == "\n".join(f["code"].split("\n")[: int(f["head_lines"])])
