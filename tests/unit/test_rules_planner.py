"""The offline rules planner: fixer checks run in a scratch copy and become whole-file edits."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from autod.act.edits import Caps, prepare, unified_diff
from autod.checks.run import run_check
from autod.config.settings import Settings
from autod.events import Event, EventKind
from autod.planner import PlanRequest
from autod.planner.rules import RulesPlanner
from autod.safety.boundary import Boundary

# A fixer outside the workspace: drops `import os` lines from every .py file under its cwd and logs the cwd.
FIXER = """
import pathlib, sys
pathlib.Path(sys.argv[1]).open("a").write(str(pathlib.Path.cwd()) + "\\n")
for p in pathlib.Path(".").rglob("*.py"):
    p.write_text(p.read_text().replace("import os\\n", ""))
"""
MOD = "import os\nimport sys\n\nprint(sys.argv)\n"


def _setup(tmp_path: Path, checks: dict[str, Any]) -> tuple[Path, RulesPlanner]:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text(MOD)
    (ws / "clean.py").write_text("print(1)\n")
    (tmp_path / "fixer.py").write_text(FIXER)
    return ws, RulesPlanner(Settings(workspace=ws, checks=checks), run_check)


def _fixer(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    # Unsandboxed, so these tests can log the fixer's cwd to the host; the sandboxed path is below.
    run = f"{sys.executable} {tmp_path / 'fixer.py'} {tmp_path / 'cwd.log'}"
    return {"run": run, "fixer": True, "sandbox": "off", **extra}


def _plan(planner: RulesPlanner, mode: str = "auto-debug", context: dict[str, Any] | None = None):
    event = Event(source="check:lint", kind=EventKind.CHECK_FAILED, summary="lint failed", fingerprint="fp")
    request = PlanRequest(mode=mode, event=event, messages=[], context=context or {"attempts": []})
    return asyncio.run(planner.plan(request)).plan


@pytest.mark.slow
def test_a_fixer_runs_in_a_scratch_copy_and_its_changes_become_whole_file_edits(tmp_path):
    ws, planner = _setup(tmp_path, {"lint-fix": _fixer(tmp_path)})
    plan = _plan(planner)
    (edit,) = plan.edits
    assert edit.path == "pkg/mod.py"
    assert edit.search == MOD and edit.replace == MOD.replace("import os\n", "")
    assert "lint-fix (exit 0)" in plan.summary
    # the workspace itself is untouched: the fixer ran elsewhere, and the scratch copy is gone
    assert (ws / "pkg" / "mod.py").read_text() == MOD
    (cwd,) = (tmp_path / "cwd.log").read_text().splitlines()
    assert Path(cwd) != ws and not Path(cwd).exists()


@pytest.mark.slow
def test_non_fixer_checks_are_never_run(tmp_path):
    marker = tmp_path / "ran.txt"
    not_a_fixer = {"run": f"{sys.executable} -c \"open('{marker}', 'w')\"", "when": ["manual"]}
    _ws, planner = _setup(tmp_path, {"tests": not_a_fixer, "lint-fix": _fixer(tmp_path)})
    plan = _plan(planner)
    assert [e.path for e in plan.edits] == ["pkg/mod.py"]
    assert not marker.exists()


def test_without_fixers_it_only_reports(tmp_path):
    marker = tmp_path / "ran.txt"
    _ws, planner = _setup(tmp_path, {"tests": {"run": f"{sys.executable} -c \"open('{marker}', 'w')\""}})
    plan = _plan(planner)
    assert plan.edits == [] and "no fixer checks" in plan.summary
    assert "lint failed" in (plan.report or "")
    assert not marker.exists()


def test_a_fixer_that_names_a_workspace_path_is_not_run(tmp_path):
    ws, planner = _setup(tmp_path, {})
    cmd = _fixer(tmp_path)
    cmd["run"] += f" {ws / 'pkg'}"
    planner.settings = Settings(workspace=ws, checks={"lint-fix": cmd})
    plan = _plan(planner)
    assert plan.edits == [] and not (tmp_path / "cwd.log").exists()


@pytest.mark.slow
def test_symlinks_are_left_out_of_the_scratch_copy_so_a_fixer_cannot_write_through_them(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_text(MOD)
    ws, planner = _setup(tmp_path, {"lint-fix": _fixer(tmp_path)})
    (ws / "linked.py").symlink_to(outside / "victim.py")
    plan = _plan(planner)
    assert [e.path for e in plan.edits] == ["pkg/mod.py"]
    assert (outside / "victim.py").read_text() == MOD


def _diff_of(ws: Path, plan: Any) -> str:
    """The unified diff the cycle records for an attempt: what act.unified_diff makes of the plan."""
    caps = Caps(max_edits=10, max_lines=1000, max_file_bytes=100_000)
    return unified_diff(prepare(plan, Boundary.for_settings(Settings(workspace=ws)), caps))


@pytest.mark.slow
def test_the_same_fixer_change_is_not_applied_twice_in_one_cycle_and_the_reason_says_so(tmp_path):
    ws, planner = _setup(tmp_path, {"lint-fix": _fixer(tmp_path)})
    first = _plan(planner)
    again = _plan(planner, context={"attempts": [{"summary": first.summary, "diff": _diff_of(ws, first)}]})
    assert again.edits == [] and "exactly as the attempt this cycle rolled back" in again.summary
    assert "pkg/mod.py" in again.summary


@pytest.mark.slow
def test_a_real_fixer_change_is_proposed_whatever_the_earlier_summaries_said(tmp_path):
    ws, planner = _setup(tmp_path, {"lint-fix": _fixer(tmp_path)})
    first = _plan(planner)
    # the same summary over a different change this cycle, and this very change in an earlier cycle
    other = {"summary": first.summary, "diff": "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n-import sys\n"}
    earlier = {"summary": first.summary, "diff": _diff_of(ws, first), "earlier_cycle": "yes"}
    again = _plan(planner, context={"attempts": [other, earlier]})
    assert [e.path for e in again.edits] == ["pkg/mod.py"] and again.summary == first.summary


def test_auto_plan_and_auto_doc_get_reports_not_edits(tmp_path):
    _ws, planner = _setup(tmp_path, {"lint-fix": _fixer(tmp_path)})
    plan = _plan(planner, "auto-plan", {"rules": "- Resolve 1 FIXME/XXX markers in `a.py`"})
    assert plan.edits == [] and plan.report == "- Resolve 1 FIXME/XXX markers in `a.py`"
    plan = _plan(planner, "auto-doc", {"report": "## Needs documenting\n- a.py:1 `f`: missing docstring"})
    assert plan.edits == [] and "missing docstring" in (plan.report or "")
    assert not (tmp_path / "cwd.log").exists()  # reports run no fixer


# A fixer that fixes its cwd and also tries to write the real workspace and a file on the host.
HOSTILE_FIXER = """
import pathlib
for p in pathlib.Path(".").rglob("*.py"):
    p.write_text(p.read_text().replace("import os\\n", ""))
for target in ({targets!r}):
    try:
        pathlib.Path(target).write_text("pwned")
    except OSError as exc:
        print("refused", target, exc)
"""


def test_the_fixer_runs_sandboxed_with_the_scratch_copy_as_its_workspace(tmp_path, real_bwrap):
    ws, _ = _setup(tmp_path, {})
    escape = tmp_path / "escape.txt"
    targets = (str(ws / "pkg" / "mod.py"), str(escape))
    (ws / "fix.py").write_text(HOSTILE_FIXER.format(targets=targets))
    fixer = {"run": f"{sys.executable} fix.py", "fixer": True}
    plan = _plan(RulesPlanner(Settings(workspace=ws, checks={"lint-fix": fixer}), run_check))
    assert [e.path for e in plan.edits] == ["pkg/mod.py"]
    assert plan.edits[0].replace == MOD.replace("import os\n", "")
    assert (ws / "pkg" / "mod.py").read_text() == MOD  # the real file, untouched
    assert not escape.exists()


def test_a_fixer_in_the_venv_of_a_checkout_named_autod_runs_on_the_scratch_copy(tmp_path, real_bwrap):
    # autod's own checkout as the README sets it up: cloned as `autod`, its venv and its state dir inside
    ws = tmp_path / "autod"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text(MOD)
    venv_bin = ws / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    fixer = venv_bin / "dropimport"
    fixer.write_text("#!/bin/sh\nsed -i '/^import os$/d' pkg/mod.py\n")
    fixer.chmod(0o755)
    checks = {"lint-fix": {"run": "dropimport", "fixer": True}}
    plan = _plan(RulesPlanner(Settings(workspace=ws, checks=checks), run_check))
    assert "lint-fix (exit 0)" in plan.summary, plan.summary
    assert [e.path for e in plan.edits] == ["pkg/mod.py"]
    assert plan.edits[0].replace == MOD.replace("import os\n", "")
    assert (ws / "pkg" / "mod.py").read_text() == MOD  # the real file, untouched
