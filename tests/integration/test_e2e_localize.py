"""End to end: `autod run` localizes a failing test, answers one `need`, and records what it showed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, write_config

pytestmark = pytest.mark.slow


def test_the_need_round_shows_asked_definitions_and_nothing_outside_the_read_rules(
    tmp_path: Path, calc_repo: Path, scripted_llm
) -> None:
    (calc_repo / ".env").write_text("def leaked_secret():\n    return 'hunter2-token'\n")
    (tmp_path / "outside.py").write_text("def outside_fn():\n    return 'outside-body'\n")
    scripted_llm.push_plan(
        {
            "summary": "show me mul first",
            "edits": [],
            "verify": [],
            "report": None,
            "need": ["src/calc.py::mul", ".env::leaked_secret", "../outside.py::outside_fn", "/etc/passwd"],
        }
    )
    scripted_llm.push_plan(FIX_PLAN)
    cfg = base_config(calc_repo, ranked=True)
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["state_dir"] = str(tmp_path / "state")
    log_file = tmp_path / "state" / "logs" / "autod.jsonl"
    d = Autod(write_config(tmp_path / "autod.yaml", cfg), log_file=log_file)
    d.start()
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        first, second = (json.dumps(q["messages"]) for q in scripted_llm.requests[:2])
        # the first prompt: the failing test and the function it calls, whole, exact text
        assert "def test_add():\\n    assert add(2, 3) == 5" in first
        assert "def add(a, b):\\n    return a - b" in first
        assert "def mul(a, b):  [5-6]" in first and "return a * b" not in first  # mul: its outline only
        # the second: what was asked, and nothing a prompt may not show
        assert "def mul(a, b):\\n    return a * b" in second
        for leak in ("hunter2-token", "leaked_secret():", "outside-body", "root:"):
            assert leak not in second
        # the record names what went into the prompts
        shown = {(c["path"], c["symbol"]) for c in r["context"]}
        assert {("tests/test_calc.py", "test_add"), ("src/calc.py", "add"), ("src/calc.py", "mul")} <= shown
        assert all(c["path"] not in (".env", "../outside.py") for c in r["context"])
    finally:
        assert d.stop() == 0
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY.replace("a - b", "a + b")
