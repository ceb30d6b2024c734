"""Progress for a person and a cycle's deadline, through the real CLI: `autod run --once
--max-minutes` ends a cycle whose model hangs with the deadline as its reason and the tree untouched,
and `autod status` shows the current cycle's draws, model time and an estimate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, Autod, base_config, run_cli, write_config

pytestmark = pytest.mark.slow

WRONG = "It must multiply.\n\n### src/calc.py · add\n```python\ndef add(a, b):\n    return a * b\n```\n"


def configure(tmp_path: Path, repo: Path, url: str) -> Path:
    cfg = base_config(repo, ranked=True, candidates={"n": 2, "focused": 0},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 2}})
    # the model may take its time: only the cycle's deadline stops a draw here
    cfg["llm"] |= {"base_url": url, "timeout_s": 300, "request_timeout_s": 300, "max_retries": 0}
    cfg["state_dir"] = str(tmp_path / "state")
    return write_config(tmp_path / "autod.yaml", cfg)


def test_run_once_max_minutes_ends_a_hanging_cycle_unfixed_with_the_deadline_as_its_reason(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    scripted_llm.push_text(WRONG)  # the first draw: a wrong fix, rolled back on the mirror
    scripted_llm.push_hang(90)  # the second: a model that does not come back in time
    config = configure(tmp_path, calc_repo, scripted_llm.base_url)
    out = run_cli("run", "--once", "--max-minutes", "0.4", "-c", str(config), timeout=240)
    assert out.returncode == 1, out.stderr[-3000:]  # the checks still fail on the tree it leaves
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY  # nothing half-applied
    rows = json.loads(run_cli("history", "--json", "-c", str(config)).stdout)
    assert len(rows) == 1 and rows[0]["status"] in ("rolled_back", "failed"), rows
    assert "stopped at the cycle's deadline (0.4 min, candidates.max_cycle_minutes)" in rows[0]["reason"]
    assert "then attempt 2" not in rows[0]["reason"]  # no re-plan past the deadline
    assert "candidates.progress" in out.stderr and "draw 1 of 2" in out.stderr, out.stderr[-3000:]


def test_max_minutes_is_for_run_once_and_must_be_positive(tmp_path, calc_repo):
    config = write_config(tmp_path / "autod.yaml", base_config(calc_repo))
    out = run_cli("run", "--max-minutes", "5", "-c", str(config))
    assert out.returncode == 2 and "--max-minutes bounds the cycles of `autod run --once`" in out.stderr
    out = run_cli("run", "--once", "--max-minutes", "0", "-c", str(config))
    assert out.returncode == 2 and "more than 0" in out.stderr


def test_status_shows_the_current_cycles_draws_model_time_and_an_estimate(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    scripted_llm.push_text(WRONG)
    scripted_llm.push_hang(60)
    config = configure(tmp_path, calc_repo, scripted_llm.base_url)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        d.wait_for(lambda recs: any(x.get("event") == "candidates.progress" for x in recs), timeout=120,
                   what="the first draw judged")
        data = json.loads(run_cli("status", "--json", "-c", str(config)).stdout)
        draws = data["current_cycle"]["draws"]
        assert (draws["done"], draws["planned"]) == (1, 2), data["current_cycle"]
        assert draws["model_s"] >= 0 and draws["eta_s"] is not None and draws["deadline_in_s"] is None
        text = run_cli("status", "-c", str(config)).stdout
        assert "  draws: draw 1 of 2, model time " in text and " left" in text, text
    finally:
        assert d.stop() == 0


def test_run_once_starts_no_draw_the_deadline_would_cut_and_says_so(tmp_path, calc_repo, scripted_llm,
                                                                    real_bwrap):
    """The last run measured a server that writes a token in 10 s (kept in the state db, as
    autod.runtime.windows keeps it); with 2 minutes to the deadline no draw after the cycle's first can
    finish, so none is started: the cycle ends at once with a reason that says so, and the server is
    asked once. Before, every planned draw was sent, the last one left to the deadline to cut."""
    from autod.planner.pace import Speeds
    from autod.runtime.windows import KeptPace
    from autod.stores.state import State

    for _ in range(6):
        scripted_llm.push_text(WRONG)  # wrong fixes, each rolled back: the search would go on
    cfg = base_config(calc_repo, ranked=True, candidates={"n": 2, "focused": 2},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 2}})
    cfg["llm"] |= {"base_url": scripted_llm.base_url, "timeout_s": 300, "request_timeout_s": 300,
                   "max_retries": 0, "reply_form": "code"}
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    state = State(tmp_path / "state" / "state.db")
    try:
        asyncio.run(KeptPace(state).keep_pace(f"{scripted_llm.base_url}|qwen2.5-coder:7b", Speeds(0.5, 10.0)))
    finally:
        state.close()
    out = run_cli("run", "--once", "--max-minutes", "2", "-c", str(config), timeout=240)
    assert out.returncode == 1, out.stderr[-3000:]
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
    assert "llm.pace_recalled" in out.stderr, out.stderr[-3000:]  # the kept speed is the one priced
    assert "candidates.nothing_fits" in out.stderr, out.stderr[-3000:]
    rows = json.loads(run_cli("history", "--json", "-c", str(config)).stdout)
    assert len(rows) == 1, rows
    assert "stopped before the cycle's deadline (2 min, candidates.max_cycle_minutes): no draw left would " \
        "finish in the" in rows[0]["reason"], rows[0]["reason"]
    asked = [b for b in scripted_llm.requests if "messages" in b or "prompt" in b]
    assert len(asked) == 1, [b.get("temperature") for b in asked]  # the first draw alone
