"""A candidate's verification names its files to every check it runs (autod.checks.pertest
CANDIDATE_FILES, which the reach guard reads: autod.checks.judge_reach), focus runs included; any other
run names none, and neither does a run after the verification, whatever it raised."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from autod.checks.pertest import CANDIDATE_FILES
from autod.checks.run import CheckResult
from autod.config.models import CheckConfig
from autod.config.settings import Settings
from autod.events import Event, EventKind
from autod.modes import ModeEnv
from autod.modes.verifying import verify_by_checks
from autod.plan import Edit, Plan


def env_seeing(ws: Path, seen: list[tuple[str, tuple[str, ...]]], fail: bool = False) -> ModeEnv:
    settings = Settings(workspace=ws, checks={"tests": CheckConfig(run="true", focus="true tests/x")})

    async def run_check(name: str, *, run: str | None = None, **extra: Any) -> CheckResult:
        seen.append((f"{name}:focus" if run else name, CANDIDATE_FILES.get()))
        if fail:
            raise RuntimeError("the check runner broke")
        return CheckResult(name=name, exit_code=0, output="", duration_ms=1)

    return ModeEnv(settings=settings, state=None, memory=None, run_check=run_check)  # type: ignore[arg-type]


def test_every_check_of_a_verification_is_told_the_candidates_files(tmp_path: Path) -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []
    plan = Plan(summary="fix", edits=[Edit(path="src/b.py", search="x", replace="y"),
                                      Edit(path="src/a.py", search="1", replace="2"),
                                      Edit(path="src/b.py", search="z", replace="w")], verify=["tests"])
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f",
                  payload={"check": "tests"})

    async def verify_then_look(fail: bool) -> tuple[str, ...]:
        with contextlib.suppress(RuntimeError):
            await verify_by_checks(event, plan, env_seeing(tmp_path, seen, fail))
        return CANDIDATE_FILES.get()  # what a plain run after it, in the same task, would name

    assert asyncio.run(verify_then_look(False)) == ()
    assert seen == [("tests:focus", ("src/a.py", "src/b.py")), ("tests", ("src/a.py", "src/b.py"))]
    assert asyncio.run(verify_then_look(True)) == ()
    assert seen[-1] == ("tests:focus", ("src/a.py", "src/b.py"))
