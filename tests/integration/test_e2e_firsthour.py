"""A new operator's first hour (issue 21): right fixes kept when checks write build output, honest
`--once` exit codes, outages that cost nothing, and the operator's levers on waiting retries.

Every daemon is `autod run` as a subprocess on a real git repository, with real checks (pytest under
bubblewrap when it works here) and the scripted loopback LLM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, git, run_cli, write_config

pytestmark = pytest.mark.slow

CALC_FIXED = CALC_BUGGY.replace("a - b", "a + b")
# What `pytest --cov --cov-report=html` leaves behind on every run (wcwidth's tox.ini does this): a
# report directory and a data file, both ignored by git.
COVERAGE_CONFTEST = '''\
import pathlib, time

def pytest_sessionfinish(session, exitstatus):
    root = pathlib.Path(__file__).resolve().parents[1]
    (root / "htmlcov").mkdir(exist_ok=True)
    (root / "htmlcov" / "index.html").write_text(f"<p>exit {int(exitstatus)} at {time.time()}</p>")
    (root / ".coverage").write_text(str(time.time()))
'''
# A check that rewrites a tracked file on every run (a coverage badge committed to the repository).
BADGE_CONFTEST = '''\
import pathlib, time

def pytest_sessionfinish(session, exitstatus):
    badge = pathlib.Path(__file__).resolve().parents[1] / "COVERAGE.md"
    badge.write_text(f"coverage measured at {time.time()}\\n")
'''


def commit(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "setup")


def coverage_repo(repo: Path) -> Path:
    commit(repo, {
        "tests/conftest.py": COVERAGE_CONFTEST,
        ".gitignore": ".autod/\n__pycache__/\n.pytest_cache/\nhtmlcov/\n.coverage\n",
    })
    return repo


def configure(tmp_path: Path, repo: Path, llm_url: str | None, **overrides: Any) -> Path:
    cfg = base_config(repo, **overrides)
    cfg["llm"]["base_url"] = llm_url
    cfg["state_dir"] = str(tmp_path / "state")
    return write_config(tmp_path / "autod.yaml", cfg)


def log_file(tmp_path: Path) -> Path:
    return tmp_path / "state" / "logs" / "autod.jsonl"


def records(tmp_path: Path) -> list[dict[str, Any]]:
    path = log_file(tmp_path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def history(config: Path) -> list[dict[str, Any]]:
    out = run_cli("history", "--json", "-c", str(config))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# -- 1. verification judges the source, not what a check writes beside it ---------------------


def test_a_right_fix_is_kept_when_the_check_writes_ignored_coverage_output(tmp_path, calc_repo, scripted_llm):
    coverage_repo(calc_repo)
    scripted_llm.push_plan(FIX_PLAN)
    config = configure(tmp_path, calc_repo, scripted_llm.base_url)
    d = Autod(config, log_file=log_file(tmp_path)).start()
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", (r["status"], r["reason"])
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_FIXED
        assert (calc_repo / "htmlcov" / "index.html").exists()  # the check did write its report
        assert not [x for x in d.records() if x.get("event") == "check.changed_files"]
    finally:
        assert d.stop() == 0


def test_run_once_keeps_the_right_fix_and_exits_0_with_ignored_coverage_output(
    tmp_path, calc_repo, scripted_llm
):
    coverage_repo(calc_repo)
    scripted_llm.push_plan(FIX_PLAN)
    config = configure(tmp_path, calc_repo, scripted_llm.base_url)
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_FIXED
    assert [c["status"] for c in history(config)] == ["fixed"]


def test_run_once_exits_1_on_a_failing_tree_after_a_check_that_rewrites_a_tracked_file_undid_the_fix(
    tmp_path, calc_repo, scripted_llm
):
    # the check rewrites a tracked file: the fix is rolled back (autod cannot tell the two changes
    # apart), the re-plan proposes nothing, and the tree autod leaves still fails
    commit(calc_repo, {"tests/conftest.py": BADGE_CONFTEST, "COVERAGE.md": "coverage unknown\n"})
    scripted_llm.push_plan(FIX_PLAN)  # then the default: a plan with no edits
    config = configure(tmp_path, calc_repo, scripted_llm.base_url)
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    assert out.returncode == 1, out.stderr[-3000:]
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
    (row,) = history(config)
    assert row["status"] == "rolled_back", row
    assert "changed source files" in row["reason"] and "COVERAGE.md" in row["reason"], row["reason"]
    assert "then attempt 2: the planner proposed no edits" in row["reason"], row["reason"]
    # the start-up warning says what such a check means for fixes
    warned = [x for x in records(tmp_path) if x.get("event") == "check.changed_files"]
    assert warned and warned[0]["files"] == ["COVERAGE.md"] and "rolled back" in warned[0]["means"]
    finished = [x for x in records(tmp_path) if x.get("event") == "daemon.once_finished"]
    assert finished and finished[-1]["failing"] == ["tests"], finished
