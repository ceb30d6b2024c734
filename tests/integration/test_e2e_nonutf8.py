"""File names that are not UTF-8, through `autod run` with a scripted loopback LLM (the host probe's
cases): a check that writes `src/gen\\xff.py` ends its cycle with the reason recorded, escaped, in the
state db; a real save batched with `src/notes\\xff.txt` still has its check run; a failing test living
in `tests/test_b\\xff.py` ends its cycle with a recorded outcome. Never a "Logging error", a traceback
or a crashed source, and every cycle row is finished."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from daemon import CALC_BUGGY, CALC_TEST, FIX_PLAN, Autod, base_config, make_repo, run_cli, write_config
from llmserver import NOTHING_TO_DO

pytestmark = pytest.mark.slow


def _write(repo: Path, rel: bytes, text: str) -> None:
    with open(os.path.join(os.fsencode(repo), rel), "w") as f:
        f.write(text)


def _configure(tmp_path: Path, repo: Path, url: str, **over: Any) -> Path:
    cfg = base_config(repo, **over)
    cfg["llm"]["base_url"] = url
    cfg["state_dir"] = str(tmp_path / "state")
    return write_config(tmp_path / "autod.yaml", cfg)


def _cycles(tmp_path: Path) -> list[tuple[str | None, str | None]]:
    with sqlite3.connect(tmp_path / "state" / "state.db") as db:
        return db.execute("SELECT status, reason FROM cycles ORDER BY started_at").fetchall()


def _clean(stderr: str) -> None:
    assert "Logging error" not in stderr, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "UnicodeEncodeError" not in stderr, stderr[-3000:]


def test_a_check_writing_a_name_that_is_not_utf8_ends_its_cycle_with_the_reason_recorded(
    tmp_path, scripted_llm
):
    repo = make_repo(tmp_path / "repo", {
        "src/calc.py": CALC_BUGGY,
        "tests/test_calc.py": CALC_TEST,
        "tests/test_writer.py": (
            "import os, pathlib\n"
            "def test_writes():\n"
            "    d = pathlib.Path(__file__).resolve().parents[1]\n"
            "    with open(os.path.join(os.fsencode(d), b'src', b'gen\\xff.py'), 'w') as f:\n"
            "        f.write('X = 1\\n')\n"
        ),
    })
    scripted_llm.push_plan(FIX_PLAN)
    scripted_llm.set_default({"plan": NOTHING_TO_DO})
    out = run_cli("run", "--once", "-c", str(_configure(tmp_path, repo, scripted_llm.base_url)), timeout=180)
    _clean(out.stderr)
    cycles = _cycles(tmp_path)
    assert cycles and all(status is not None for status, _ in cycles), cycles  # none left running
    assert any("src/gen\\xff.py" in (reason or "") for _, reason in cycles), cycles  # named, escaped
    logged = (tmp_path / "state" / "logs" / "autod.jsonl").read_text(encoding="utf-8")
    assert "src/gen\\\\xff.py" in logged  # the reason's line: the escape, itself escaped in JSON


def test_a_real_save_batched_with_a_name_that_is_not_utf8_has_its_check_run(tmp_path, scripted_llm):
    repo = make_repo(tmp_path / "repo", {
        "src/calc.py": CALC_BUGGY.replace("a - b", "a + b"), "tests/test_calc.py": CALC_TEST})
    scripted_llm.set_default({"plan": NOTHING_TO_DO})
    config = _configure(tmp_path, repo, scripted_llm.base_url,
                        sources=[{"type": "watch", "paths": ["src", "tests"], "settle_ms": 300}])
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        d.wait_ready()
        (repo / "src" / "calc.py").write_text(CALC_BUGGY)  # the real change: it breaks the tests
        _write(repo, b"src/notes\xff.txt", "x\n")
        d.wait_for(lambda recs: [r for r in recs if r.get("event") == "check.ran"
                                 and r.get("exit_code") == 1],
                   timeout=60, what="the check of the real save, failing")
        d.wait_reflections(1)
        # a second save beside the name: the new watcher still sees it
        seen = len(d.records())
        (repo / "src" / "calc.py").write_text(CALC_BUGGY.replace("a - b", "a + b"))
        d.wait_for(lambda recs: [r for r in recs[seen:] if r.get("event") == "check.ran"
                                 and r.get("exit_code") == 0],
                   timeout=60, what="the check of the second save, passing")
    finally:
        assert d.stop() == 0
    records = d.records()
    assert not [r for r in records if r.get("event") == "source.crashed"]
    said = [r["name"] for r in records if r.get("event") == "fs.name_not_utf8_skipped"]
    assert said and all(n.endswith("src/notes\\xff.txt") for n in said), said
    assert all(status is not None for status, _ in _cycles(tmp_path))
    _clean(d.stderr())


def test_a_failing_test_in_a_file_whose_name_is_not_utf8_ends_its_cycle_with_a_recorded_outcome(
    tmp_path, scripted_llm
):
    repo = make_repo(tmp_path / "repo", {
        "src/calc.py": CALC_BUGGY, "tests/test_ok.py": "def test_ok():\n    assert True\n"})
    _write(repo, b"tests/test_b\xff.py", CALC_TEST)
    scripted_llm.push_plan(FIX_PLAN)
    scripted_llm.set_default({"plan": NOTHING_TO_DO})
    config = _configure(tmp_path, repo, scripted_llm.base_url)
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    _clean(out.stderr)
    cycles = _cycles(tmp_path)
    assert len(cycles) == 1 and cycles[0][0] == "fixed", cycles  # the fix is in src/calc.py, a UTF-8 name
    history = run_cli("history", "-c", str(config))
    assert history.returncode == 0 and "fixed" in history.stdout, history.stderr
