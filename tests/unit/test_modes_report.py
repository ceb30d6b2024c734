"""auto-plan report facts: TODO scan, rule-derived next actions, the rendered report and its fallback."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from autod.config.settings import Settings
from autod.events import Event, EventKind
from autod.modes import ModeEnv
from autod.modes.plan import PlanReportMode
from autod.modes.report import find_todos, gather_facts, render_report, rule_actions
from autod.ownwrites import OwnWrites
from autod.plan import Plan
from autod.stores.state import State

SECTIONS = [
    "## Recurring failures",
    "## Quarantined",
    "## Hot files",
    "## Lessons learned",
    "## TODO / FIXME",
    "## Next actions",
]


def test_todo_scan_skips_git_state_dir_and_virtualenvs_of_any_name(tmp_path):
    ws = tmp_path / "ws"
    for d in (".git", ".autod", ".venv", "node_modules", "myenv/lib", "elsewhere-state", "src"):
        (ws / d).mkdir(parents=True)
    (ws / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for d in (".git", ".autod", ".venv", "node_modules", "myenv/lib", "elsewhere-state"):
        (ws / d / "x.py").write_text("# FIXME: not ours\n")
    (ws / "src" / "app.py").write_text("x = 1\n\n# FIXME: handle the empty list\n")
    (ws / "notes.md").write_text("TODO write the guide\n")
    (ws / "data.bin").write_bytes(b"TODO\x00")
    (ws / "old-report.md").write_text("# autod plan report — 2024-01-01\n- `a.py:1` FIXME: listed before\n")
    todos = find_todos(ws, ws / "elsewhere-state")
    assert [(t["path"], t["line"], t["tag"], t["text"]) for t in todos] == [
        ("notes.md", 1, "TODO", "write the guide"),
        ("src/app.py", 3, "FIXME", "handle the empty list"),
    ]


def _facts(**over: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "recurring": [],
        "quarantined": [],
        "edited": [],
        "hot_git": [],
        "todos": [],
        "lessons": [],
        "statuses": {},
    }
    return facts | over


def test_rule_actions_put_quarantined_first_then_recurring_then_hot_files_then_markers():
    facts = _facts(
        todos=[
            {"path": "a.py", "line": 1, "tag": "TODO", "text": "t"},
            {"path": "b.py", "line": 2, "tag": "FIXME", "text": "f"},
        ],
        edited=[("hot.py", 3), ("cool.py", 1)],
        recurring=[
            {"fingerprint": "r1", "summary": "test_x fails", "cycles": 4, "fixed": 0},
            {"fingerprint": "r2", "summary": "once only", "cycles": 1, "fixed": 0},
            {"fingerprint": "r3", "summary": "fixed it", "cycles": 3, "fixed": 1},
        ],
        quarantined=[{"fingerprint": "q1", "summary": "flaky import", "attempts": 3}],
    )
    actions = rule_actions(facts)
    assert len(actions) == 5
    assert "flaky import" in actions[0] and "q1" in actions[0]
    assert "test_x fails" in actions[1]
    assert "`hot.py`" in actions[2]
    assert "FIXME" in actions[3] and "b.py" in actions[3]
    assert "TODO" in actions[4] and "a.py" in actions[4]
    assert rule_actions(_facts()) == [
        "Nothing urgent: no recurring failures, quarantined items or FIXMEs found"
    ]


def test_the_report_has_every_section_in_order():
    text = render_report(_facts(), "1. ship it", planned_by="planned by the LLM")
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert text.rstrip().endswith("1. ship it")
    assert "## Next actions (planned by the LLM)" in text


def _git_repo(ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    for msg in ("one", "two"):
        (ws / "hot.py").write_text(f"x = '{msg}'\n")
        subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
        subprocess.run(
            ["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", msg],
            check=True,
        )


def test_facts_come_from_the_state_db_git_and_the_workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    _git_repo(ws)
    (ws / "mod.py").write_text("# XXX: racy\n")
    state = State(tmp_path / "state.db")
    try:
        for i, status in enumerate(["rolled_back", "rolled_back"]):
            state.cycle_started(f"c{i}", f"e{i}", "auto-debug", "fpA", "check_failed", "check tests failed")
            state.cycle_finished(f"c{i}", status, None, {"edits": [{"path": "mod.py"}]})
        state.fingerprint_attempted("fpQ", "gave up on it", "rolled_back", None)
        state.quarantine("fpQ")
        env = ModeEnv(Settings(workspace=ws), state, None, run_check=None)  # type: ignore[arg-type]
        facts = asyncio.run(gather_facts(env))
    finally:
        state.close()
    assert [(r["fingerprint"], r["cycles"]) for r in facts["recurring"]] == [("fpA", 2)]
    assert [q["fingerprint"] for q in facts["quarantined"]] == ["fpQ"]
    assert facts["edited"] == [("mod.py", 2)]
    assert facts["hot_git"] == [("hot.py", 2)]
    assert [t["tag"] for t in facts["todos"]] == ["XXX"]


def test_an_empty_llm_list_falls_back_to_rule_derived_actions(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("# FIXME: broken\n")
    state = State(tmp_path / "state.db")
    try:
        settings = Settings(workspace=ws, llm={"base_url": "http://127.0.0.1:9/v1"})
        env = ModeEnv(settings, state, None, run_check=None)  # type: ignore[arg-type]
        mode = PlanReportMode()
        event = Event(
            source="m", kind=EventKind.MANUAL, summary="s", fingerprint="f", payload={"mode": "auto-plan"}
        )
        path = asyncio.run(mode.write_report(event, Plan(summary="x", report=""), env, OwnWrites()))
        text = path.read_text()
        assert (
            "## Next actions (derived by rules)" in text and "Resolve 1 FIXME/XXX markers in `a.py`" in text
        )
        path = asyncio.run(
            mode.write_report(event, Plan(summary="x", report="1. LLM item"), env, OwnWrites())
        )
        assert "## Next actions (planned by the LLM)\n1. LLM item" in path.read_text()
        assert path == ws / ".autod" / "reports" / path.name
    finally:
        state.close()


def test_lessons_that_cannot_be_recalled_leave_a_warning_naming_the_cycle(tmp_path):
    import structlog.testing

    from autod import logs

    class BrokenMemory:
        async def search(self, *_: Any, **__: Any) -> list[Any]:
            raise ConnectionError("memory server went away")

    ws = tmp_path / "ws"
    ws.mkdir()
    state = State(tmp_path / "state.db")
    try:
        env = ModeEnv(Settings(workspace=ws), state, BrokenMemory(), run_check=None)  # type: ignore[arg-type]
        logs.bind_cycle("c-report", "e1", "auto-plan")
        with structlog.testing.capture_logs() as captured:
            facts = asyncio.run(gather_facts(env))
    finally:
        logs.clear_cycle()
        state.close()
    assert facts["lessons"] == []  # the report goes on without them
    (line,) = [e for e in captured if e["event"] == "plan.lessons_unavailable"]
    assert line["log_level"] == "warning" and line["cycle_id"] == "c-report"
    assert line["error"] == "ConnectionError: memory server went away"
