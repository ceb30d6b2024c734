"""A new operator's first hour (issue 21): right fixes kept when checks write build output, honest
`--once` exit codes, outages that cost nothing, and the operator's levers on waiting retries.

Every daemon is `autod run` as a subprocess on a real git repository, with real checks (pytest under
bubblewrap when it works here) and the scripted loopback LLM.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, git, run_cli, write_config
from llmserver import ScriptedLLM

from autod.runtime.retry import JITTER

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
    assert (calc_repo / "htmlcov" / "index.html").exists()  # the check did write its report
    assert not [x for x in records(tmp_path) if x.get("event") == "check.changed_files"]


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


# -- 3. an outage costs nothing, and its end is noticed at once ----------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_json(config: Path, *args: str) -> Any:
    out = run_cli(*args, "--json", "-c", str(config))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_an_outage_longer_than_the_hourly_cap_costs_no_cycles_and_the_fix_comes_when_the_llm_is_back(
    tmp_path, calc_repo
):
    port = free_port()  # nothing listens here yet: the LLM is down (connection refused)
    config = configure(
        tmp_path, calc_repo, f"http://127.0.0.1:{port}/v1",
        # the breaker opens after 4 failures and would stay open 10 minutes; the hourly cap is 2
        llm={"max_retries": 0, "circuit_failures": 4, "circuit_cooldown_s": 600, "probe_interval_s": 0.3,
             "probe_timeout_s": 1},
        limits={"min_interval_s": 0, "max_cycles_per_hour": 2, "retry_base_s": 0.2, "retry_max_s": 0.4,
                "max_retries": 1000},
    )
    d = Autod(config, log_file=log_file(tmp_path)).start()
    llm = ScriptedLLM()
    try:
        d.wait_for(lambda recs: any(x.get("event") == "llm.unreachable" for x in recs), 30,
                   "the start-up warning that the LLM does not answer")
        outage = d.wait_reflections(4)  # more failed cycles than the hourly cap allows
        d.wait_for(lambda recs: any(x.get("reason") == "LLM circuit breaker open" for x in recs), 30,
                   "the breaker to open")
        assert all(r["status"] == "failed" and r["external"] and r["lesson"] is None for r in outage), outage
        assert "ConnectError" in outage[0]["reason"]
        # connection refused is a server that is down, not one busy with an abandoned request
        assert not [x for x in d.records() if x.get("event") == "llm.busy_server_awaited"]
        status = cli_json(config, "status")
        assert status["counters"]["cycles_last_hour"]["used"] == 0, status["counters"]
        (waiting,) = status["queue"]["retries"]  # one line for the one waiting event
        assert waiting["waits_for"] == "outage" and "ConnectError" in waiting["last_error"]
        text = run_cli("status", "-c", str(config)).stdout
        assert len([ln for ln in text.splitlines() if ln.strip().startswith("retry ")]) == 1, text

        llm.push_plan(FIX_PLAN)
        llm.start(port)  # back: the fix must not wait for the breaker's cooldown or the hourly cap
        fixed = d.wait_for(lambda _: next((r for r in d.reflections() if r["status"] == "fixed"), None),
                           45, "the fix once the LLM is back")
        assert fixed["fingerprint"] == outage[0]["fingerprint"]
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_FIXED
        assert any(x.get("event") == "llm.reachable_again" for x in d.records())
        assert not [x for x in d.records() if "max_cycles_per_hour" in str(x.get("reason", ""))]
        assert cli_json(config, "status")["counters"]["cycles_last_hour"]["used"] == 1
    finally:
        llm.stop()
        assert d.stop() == 0


# -- 3. the operator's levers on waiting events -----------------------------------------------------


def retry_rows(config: Path) -> list[dict[str, Any]]:
    return cli_json(config, "status")["queue"]["retries"]


def logged(d: Autod, event: str, n: int, what: str) -> list[dict[str, Any]]:
    """Wait for the n-th log line of this event (cheaper to poll than `autod status`)."""
    return d.wait_for(lambda recs: (got := [x for x in recs if x.get("event") == event])[n - 1:] and got,
                      60, what)


def test_retry_and_trigger_run_the_waiting_event_and_a_failure_fixed_by_hand_stops_waiting(
    tmp_path, calc_repo, scripted_llm
):
    scripted_llm.set_default({"status": 500, "body": "model crashed"})  # up, but every plan fails
    config = configure(
        tmp_path, calc_repo, scripted_llm.base_url,
        llm={"max_retries": 0, "circuit_failures": 100},
        limits={"min_interval_s": 0, "retry_base_s": 3600, "retry_max_s": 3600},
        sources=[{"type": "watch", "paths": ["src"], "settle_ms": 200}],
    )
    d = Autod(config, log_file=log_file(tmp_path)).start()
    try:
        logged(d, "dispatch.retry_scheduled", 1, "the event to wait an hour")
        (row,) = retry_rows(config)
        # an hour less the jitter's widest draw, less the seconds this test took to ask
        assert row["due_in_s"] > 3600 * (1 - JITTER) - 120
        assert row["retries"] == 1 and row["waits_for"] == "outage"
        text = run_cli("status", "-c", str(config)).stdout
        assert len([ln for ln in text.splitlines() if ln.strip().startswith("retry ")]) == 1, text

        # trigger: the waiting event runs now; no second event is queued
        out = run_cli("trigger", "auto-debug", "-c", str(config))
        assert out.returncode == 0 and "started the waiting event" in out.stdout, out
        logged(d, "dispatch.retry_scheduled", 2, "its second try")
        status = cli_json(config, "status")
        (again,) = status["queue"]["retries"]
        assert again["id"] == row["id"] and again["retries"] == 2 and status["queue"]["depth"] == 1

        # retry: by a prefix of its id, now; this time the LLM has the fix
        scripted_llm.set_default({"plan": FIX_PLAN})
        out = run_cli("retry", row["id"][:8], "-c", str(config))
        assert out.returncode == 0 and "retrying now" in out.stdout, out
        d.wait_for(lambda _: any(r["status"] == "fixed" for r in d.reflections()), 60, "the fix")

        # a failure fixed by hand while it waits is dropped at once, not when its retry comes due
        scripted_llm.set_default({"status": 500, "body": "model crashed"})
        # a new bug (the same one back would be replayed from memory, with no model call)
        (calc_repo / "src" / "calc.py").write_text(CALC_FIXED.replace("return a * b", "return a ** b"))
        logged(d, "dispatch.retry_scheduled", 3, "the new failure to wait")
        # (not byte for byte autod's own fix: the watcher ignores a file that holds what autod wrote)
        (calc_repo / "src" / "calc.py").write_text(CALC_FIXED + "# fixed by hand\n")
        logged(d, "dispatch.resolved", 1, "the fixed failure to stop waiting")
        assert retry_rows(config) == [] and history(config)[0]["status"] == "resolved"
        assert run_cli("retry", "--all", "-c", str(config)).stdout.strip() == "nothing waits for a retry"
    finally:
        assert d.stop() == 0


def test_with_the_daemon_down_retry_and_trigger_are_stored_for_the_next_start(tmp_path, calc_repo):
    from autod.events import Event, EventKind
    from autod.stores.queue import EventQueue
    from autod.stores.state import State

    config = configure(tmp_path, calc_repo, "http://127.0.0.1:9/v1")
    (tmp_path / "state").mkdir()
    State(tmp_path / "state" / "state.db").close()  # as a daemon that ran before left it
    queue = EventQueue(tmp_path / "state" / "queue.db")
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="check tests failed",
                  fingerprint="fp", payload={"check": "tests"})
    queue.put(event)
    assert queue.lease() is not None
    queue.defer(event.id, 3600, "failed: ConnectError", kind="outage")
    queue.close()

    out = run_cli("trigger", "auto-debug", "-c", str(config))
    assert out.returncode == 0 and f"due at the next start: waiting event {event.id[:12]}" in out.stdout, out
    (row,) = retry_rows(config)  # not queued twice
    assert row["id"] == event.id and row["due_in_s"] == 0.0
    assert cli_json(config, "status")["queue"]["depth"] == 1
    out = run_cli("retry", "--all", "-c", str(config))
    assert out.returncode == 0 and f"due at the next start: {event.id[:12]}" in out.stdout, out
    assert run_cli("retry", "nosuchevent", "-c", str(config)).returncode == 1
    assert run_cli("retry", "-c", str(config)).returncode == 2  # neither an event nor --all


def test_run_once_fixes_a_workspace_in_srv_with_the_default_state_dir_inside_it(scripted_llm, real_bwrap):
    """Where operators keep a service's tree (/srv, /opt) and autod's default state dir
    (<workspace>/.autod): the sandboxed check must run (it failed with bwrap's "Can't remount
    readonly ... .autod" when a later bind of the workspace uncovered the hidden state dir)."""
    import shutil
    import tempfile

    from daemon import make_calc_repo

    parent = next((p for p in ("/srv", "/opt", "/var/lib", "/mnt") if os.access(p, os.W_OK)), None)
    if parent is None:
        pytest.skip("no writable directory outside the hidden roots (CI runs as root)")
    place = Path(tempfile.mkdtemp(prefix="autod-e2e-", dir=parent))
    try:
        repo = make_calc_repo(place / "repo")
        scripted_llm.push_plan(FIX_PLAN)
        cfg = base_config(repo)
        cfg["checks"]["tests"]["sandbox"] = "bwrap"
        cfg["llm"]["base_url"] = scripted_llm.base_url
        config = write_config(place / "autod.yaml", cfg)  # no state_dir: <workspace>/.autod
        out = run_cli("run", "--once", "-c", str(config), timeout=180)
        assert out.returncode == 0, out.stderr[-3000:]
        assert (repo / "src" / "calc.py").read_text() == CALC_FIXED
        assert (repo / ".autod" / "state.db").exists()
    finally:
        shutil.rmtree(place, ignore_errors=True)
