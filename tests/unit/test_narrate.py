"""What the daemon tells the person watching it: its readiness and each cycle, one plain line each."""

from __future__ import annotations

import asyncio

import pytest

from autod.checks.run import CheckResult
from autod.runtime.narrate import cycle_line, ready_line
from autod.runtime.sourceset import SourceSet


def result(name: str, code: int, ms: int = 1500, error: str | None = None) -> CheckResult:
    return CheckResult(name=name, exit_code=code, output="", duration_ms=ms, error=error)


def test_ready_says_each_start_up_verdict_what_is_queued_and_what_is_watched():
    results = {"lint": result("lint", 0, 700), "tests": result("tests", 1, 8200)}
    said = ready_line(results, ["check", "watch:src,tests"], ["auto-debug"])
    assert said == ("start-up checks: lint passed (0.7s), tests failed (8.2s); tests queued for auto-debug;"
                    " armed: watch:src,tests")
    calm = ready_line({"lint": result("lint", 0)}, ["check"], ["auto-debug"])
    assert calm.endswith("nothing to fix; no source watches for changes")
    broken = ready_line({"lint": result("lint", 127, error="ruff: not found")}, ["check"], [])
    assert broken.startswith("start-up checks: lint cannot start") and "queued" not in broken


def test_a_cycle_line_leads_with_the_fix_read_from_the_diff_and_names_where_it_went():
    record = {
        "cycle_id": "0123456789ab", "status": "fixed", "summary": "check lint failed (exit 1): F401",
        "fix": "rewrites inventory.py", "plan_summary": "the model's words",
        "edits": [{"path": "inventory.py"}],
        "checks": [{"name": "lint", "exit_code": 0}, {"name": "tests", "exit_code": 0}],
    }
    assert cycle_line(record) == (
        "fixed: check lint failed (exit 1): F401; rewrites inventory.py; checks: lint passed, tests passed;"
        " in the working tree (inventory.py) (autod show 01234567)"
    )
    branch = {**record, "delivery": {"branch": "autod/auto-debug/lint-1234"}}
    assert "delivered to autod/auto-debug/lint-1234 (autod show" in cycle_line(branch)
    waits = cycle_line({**record, "status": "pending_approval", "proposal_id": "p1"})
    assert waits.startswith("a proposal waits: `autod approve p1`")
    rolled = cycle_line({**record, "status": "rolled_back", "reason": "no candidate passed the checks"})
    assert rolled.startswith("rolled_back: check lint failed") and "no candidate passed" in rolled


@pytest.mark.slow
def test_wait_armed_returns_once_every_live_source_is_armed_and_skips_one_that_ended():
    async def go() -> list[str]:
        class Source:
            def __init__(self, arm_after: float | None) -> None:
                self.armed = asyncio.Event()
                self.arm_after = arm_after

            async def events(self):  # type: ignore[no-untyped-def]
                if self.arm_after is None:
                    return  # a source that ends at once is not waited for
                await asyncio.sleep(self.arm_after)
                self.armed.set()
                await asyncio.Event().wait()
                yield  # pragma: no cover

        async def accept(_: object) -> None:
            return None

        sources = SourceSet(accept)
        sources.start([("slow", "x", lambda: Source(0.2)), ("done", "y", lambda: Source(None)),
                       ("quick", "z", lambda: Source(0))])
        try:
            return await asyncio.wait_for(sources.wait_armed(poll_s=0.01), 10)
        finally:
            await sources.stop()

    assert sorted(asyncio.run(go())) == ["quick", "slow"]
