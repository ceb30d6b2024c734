"""The act phase as a function (autod.cycle.act): a prepared plan in, what became of it out as a value;
the cycle's record changes only when the cycle records that value."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_cycle import BUGGY, FIX, WRONG, ScriptedPlanner, failing_event, make

from autod.cycle.act import Acted, Acting, Proposal, act, prepare, record
from autod.modes.debug import DebugMode
from autod.plan import Plan
from autod.reflection import Reflection


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "src").mkdir(parents=True)
    (tmp_path / "ws" / "src" / "calc.py").write_text(BUGGY)
    return tmp_path / "ws"


def acted(ws: Path, plan: Plan, **cfg: Any) -> tuple[Acted | Proposal, Reflection, Reflection]:
    """What the act phase returns for `plan`, the record untouched by it, and the record after `record`."""
    deps, state = make(ws, ScriptedPlanner(), **cfg)
    event = failing_event()
    on = Acting(deps, DebugMode(), event)

    def fresh() -> Reflection:
        return Reflection(cycle_id="c0ffee", event_id=event.id, mode="auto-debug",
                          fingerprint=event.fingerprint, kind=str(event.kind), summary=event.summary)

    async def main() -> tuple[Acted | Proposal, Reflection, Reflection]:
        r = fresh()
        changes, diff = await prepare(on, plan)
        done = await act(on, r, plan, changes, diff)
        untouched = Reflection(**r.record())
        record(r, done, event)
        return done, untouched, r

    try:
        return asyncio.run(main())
    finally:
        state.close()


def test_a_kept_fix_comes_back_as_a_value_and_the_record_changes_only_when_the_cycle_records_it(ws):
    done, before, r = acted(ws, FIX)
    assert isinstance(done, Acted) and done.verification.status == "fixed"
    assert [c.rel for c in done.kept] == ["src/calc.py"] and done.rollback is None and done.left == []
    assert "+    return a + b" in done.diff
    assert before.edits == [] and before.fix is None and before.checks == []
    assert r.edits == [{"path": "src/calc.py", "added": 1, "removed": 1}] and r.fix and r.checks
    assert (ws / "src" / "calc.py").read_text() == BUGGY.replace("a - b", "a + b")


def test_a_failed_plan_comes_back_rolled_back_with_what_the_rollback_restored(ws):
    done, before, r = acted(ws, WRONG)
    assert isinstance(done, Acted) and done.verification.status == "rolled_back" and done.kept == ()
    assert done.rollback == {"restored": ["src/calc.py"], "left": []}
    assert before.rollback is None and r.rollback == done.rollback and r.fix is None
    assert (ws / "src" / "calc.py").read_text() == BUGGY


def test_a_plan_the_mode_must_confirm_comes_back_as_a_proposal_and_nothing_is_written(ws):
    done, before, r = acted(ws, FIX, limits={"require_confirmation": True})
    assert isinstance(done, Proposal) and done.why is None
    assert done.edits == [{"path": "src/calc.py", "added": 1, "removed": 1}]
    assert before.status == "failed" and before.proposal_id is None and before.edits == []
    assert r.status == "pending_approval" and r.proposal_id == done.id and r.edits == done.edits
    assert (ws / "src" / "calc.py").read_text() == BUGGY
