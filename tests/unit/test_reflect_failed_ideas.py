"""Lessons from failures: each idea a cycle verified that did not fix the failure is remembered."""

from __future__ import annotations

import asyncio
from typing import Any

from autod.cycle.reflect import failed_ideas, remember
from autod.reflection import Reflection


class Recorder:
    def __init__(self) -> None:
        self.lessons: list[tuple[str, dict[str, Any], bool]] = []
        self.episodes: list[tuple[str, dict[str, Any]]] = []

    async def add_episode(self, text: str, metadata: dict[str, Any], *, defer: bool = False) -> str:
        self.episodes.append((text, metadata))
        return "e"

    async def add_lesson(self, text: str, metadata: dict[str, Any], *, success: bool,
                         defer: bool = False) -> str:
        self.lessons.append((text, metadata, success))
        return "l"


def cycle(status: str, plan_summary: str) -> Reflection:
    r = Reflection("c1", "e1", "auto-debug", "fp", "check_failed", "tests fail: test_add", status=status,
                   plan_summary=plan_summary, lesson=f"the cycle's own lesson ({status})")
    r.candidates = [
        {"n": 1, "outcome": "rolled_back", "idea": "multiply the operands", "where": ["src/calc.py::add"]},
        {"n": 2, "outcome": "duplicate", "idea": "multiply the operands", "where": ["src/calc.py::add"]},
        {"n": 3, "outcome": "rolled_back", "idea": "multiply the operands", "where": ["src/calc.py::add"]},
        {"n": 4, "outcome": "refused", "idea": "edit the test", "where": ["tests/test_calc.py"]},
        {"n": 5, "outcome": "fixed", "idea": "add must add", "where": ["src/calc.py::add"]},
    ]
    return r


def test_a_fixed_cycle_remembers_the_idea_that_did_not_work_before_its_fix():
    (idea,) = failed_ideas(cycle("fixed", "add must add"))
    assert idea == ("[auto-debug] Failure: tests fail: test_add. Tried: multiply the operands "
                    "(changed src/calc.py::add). Outcome: it did NOT work: the checks still failed.")
    memory = Recorder()
    asyncio.run(remember(memory, cycle("fixed", "add must add"), "diff"))  # type: ignore[arg-type]
    assert [(t[:40], s) for t, _, s in memory.lessons] == [
        ("the cycle's own lesson (fixed)", True), (idea[:40], False)]
    assert memory.lessons[1][1]["status"] == "rolled_back" and memory.lessons[1][1].get("replay") is None


def test_the_idea_the_cycles_own_lesson_tells_is_not_stored_twice():
    assert failed_ideas(cycle("rolled_back", "multiply the operands")) == []
