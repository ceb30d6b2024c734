"""Every log event autod emits is named `area.snake_case_verb` (docs/OPERATIONS.md, Event names)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import autod

AREAS = {
    "daemon",
    "config",
    "source",
    "watch",
    "logtail",
    "cron",
    "check",
    "sandbox",
    "queue",
    "dispatch",
    "replay",
    "cycle",
    "plan",
    "act",
    "memory",
    "llm",
    "git",
    "control",
    "proposal",
    "quarantine",
    "localize",
    "metrics",
    "webhook",
    "delivery",
    "undo",
    "isolation",
    "candidates",
    "transcripts",
    "fs",
}
NAME = re.compile(r"^([a-z]+)\.[a-z0-9_]+$")
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "msg"}


def _events() -> list[tuple[str, str]]:
    """(event, where) for every log call whose first argument is a string literal."""
    root = Path(autod.__file__).parent
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in LEVELS:
                target = func.value
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                if "log" in name:
                    out.append((first.value, f"{path.relative_to(root)}:{node.lineno}"))
            elif isinstance(func, ast.Attribute) and func.attr == "survive":
                # with logs.survive("cycle.reflect_failed", ...): the warning it logs on an error
                out.append((first.value, f"{path.relative_to(root)}:{node.lineno}"))
            elif isinstance(func, ast.Call) and getattr(func.func, "id", "") == "getattr":
                # getattr(log, level)("cycle.finished", ...)
                out.append((first.value, f"{path.relative_to(root)}:{node.lineno}"))
    return out


@pytest.mark.slow
def test_every_log_event_follows_area_dot_snake_case() -> None:
    events = _events()
    assert len(events) > 80  # the walk found the log calls (a broken walk must not pass vacuously)
    bad = [(e, where) for e, where in events if not (m := NAME.match(e)) or m.group(1) not in AREAS]
    assert not bad, bad


@pytest.mark.slow
def test_the_walk_sees_the_errors_the_daemon_survives() -> None:
    assert "cycle.reflect_failed" in {e for e, _ in _events()}


@pytest.mark.slow
def test_the_reflection_record_is_cycle_finished() -> None:
    assert "cycle.finished" in {e for e, _ in _events()}
