"""The check runner: only the configured command, a timeout that kills the whole process group,
an output cap that keeps the head and the tail."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from autod.checks import run_check
from autod.config import CheckConfig


def run(cfg: CheckConfig, cwd: Path):
    return asyncio.run(run_check("t", cfg, cwd))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_timeout_kills_the_check_and_its_children(tmp_path):
    script = "sleep 60 & echo $! > child.pid; wait"
    r = run(CheckConfig(run=f"sh -c '{script}'", timeout_s=0.5), tmp_path)
    assert r.timed_out and r.exit_code == 124 and not r.ok
    assert "timed out after 0.5s" in r.output
    assert wait_dead(int((tmp_path / "child.pid").read_text()))


def test_a_background_child_holding_the_pipe_does_not_hang_the_runner(tmp_path):
    script = "sleep 60 & echo $! > child.pid; echo done"
    r = run(CheckConfig(run=f"sh -c '{script}'", timeout_s=30), tmp_path)
    assert r.exit_code == 0 and "done" in r.output and not r.timed_out
    assert wait_dead(int((tmp_path / "child.pid").read_text()))


def test_output_is_capped_keeping_head_and_tail(tmp_path):
    code = "print('HEAD-MARK'); print('x' * 200000); print('TAIL-MARK')"
    r = run(CheckConfig(run=f'{sys.executable} -c "{code}"', output_limit_kb=1), tmp_path)
    assert r.truncated and r.ok
    assert r.output.startswith("HEAD-MARK") and r.output.rstrip().endswith("TAIL-MARK")
    assert "[output truncated]" in r.output and len(r.output) < 1200


def test_runs_in_the_workspace_with_the_configured_env_and_no_shell(tmp_path):
    code = "import os; print(os.getcwd()); print(os.environ['AUTOD_PROBE'])"
    r = run(CheckConfig(run=f'{sys.executable} -c "{code}"', env={"AUTOD_PROBE": "yes"}), tmp_path)
    assert r.output.split() == [str(tmp_path), "yes"]
    # no shell: metacharacters are plain arguments
    r = run(CheckConfig(run="echo a; touch pwned"), tmp_path)
    assert r.output.strip() == "a; touch pwned" and not (tmp_path / "pwned").exists()


def test_a_missing_program_is_a_failed_check_not_an_exception(tmp_path):
    r = run(CheckConfig(run="no-such-program-autod --x"), tmp_path)
    assert r.exit_code == 127 and "no-such-program-autod" in r.output
