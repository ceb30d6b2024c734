"""The check runner: only the configured command, resolved in the workspace's venv first; a timeout
that kills everything the check started (in bwrap and off mode); an output cap that keeps the head
and the tail; the sandbox's walls (real bwrap); the files a check changed."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from procs import alive_with, wait_gone

from autod.checks import sandbox
from autod.checks.run import find_venv, resolve_program, run_check
from autod.config.settings import CheckConfig


@pytest.fixture(params=["bwrap", "off"])
def mode(request):
    """Each test that takes `mode` runs under the real bwrap and with sandbox: off."""
    if request.param == "bwrap":
        request.getfixturevalue("real_bwrap")
    return request.param


def run(cfg: CheckConfig, cwd: Path, **kw):
    return asyncio.run(run_check("t", cfg, cwd, **kw))


def sleeper(marker: str) -> str:
    """A shell line that sleeps 60 s in a process that carries a unique marker in its argv."""
    return f"sh -c 'sleep 60; true' {marker}"


@pytest.mark.slow
def test_a_timeout_kills_the_check_its_children_and_a_setsid_escapee(tmp_path, mode):
    marker = f"autod-test-{uuid.uuid4().hex}"
    script = f"{sleeper(marker)} & setsid {sleeper(marker)} & wait"
    r = run(CheckConfig(run=f'sh -c "{script}"', timeout_s=1, sandbox=mode), tmp_path)
    assert not r.error, r.output
    assert r.timed_out and r.exit_code == 124 and not r.ok
    assert "timed out after 1s" in r.output
    assert wait_gone(marker), alive_with(marker)


def test_nothing_a_passing_check_started_outlives_it(tmp_path, mode):
    # A background child holding the pipe must not hang the runner, and a setsid double fork must
    # not escape: the old process-group kill missed it.
    marker = f"autod-test-{uuid.uuid4().hex}"
    script = f"{sleeper(marker)} & (setsid {sleeper(marker)} &) ; echo done"
    t0 = time.monotonic()
    r = run(CheckConfig(run=f'sh -c "{script}"', timeout_s=30, sandbox=mode), tmp_path)
    assert r.exit_code == 0 and "done" in r.output and not r.timed_out
    assert time.monotonic() - t0 < 25  # a hang guard, not a speed bar
    assert wait_gone(marker), alive_with(marker)


@pytest.mark.slow
def test_output_is_capped_keeping_head_and_tail(tmp_path):
    code = "print('HEAD-MARK'); print('x' * 200000); print('TAIL-MARK')"
    r = run(CheckConfig(run=f'{sys.executable} -c "{code}"', output_limit_kb=1), tmp_path)
    assert r.truncated and r.ok
    assert r.output.startswith("HEAD-MARK") and r.output.rstrip().endswith("TAIL-MARK")
    assert "[output truncated]" in r.output and len(r.output) < 1200


@pytest.mark.slow
def test_runs_in_the_workspace_with_the_configured_env_and_no_shell(tmp_path, mode):
    code = "import os; print(os.getcwd()); print(os.environ['CHECK_PROBE'])"
    cfg = CheckConfig(run=f'{sys.executable} -c "{code}"', env={"CHECK_PROBE": "yes"}, sandbox=mode)
    r = run(cfg, tmp_path)
    assert r.output.split() == [str(tmp_path), "yes"]
    # no shell: metacharacters are plain arguments
    r = run(CheckConfig(run="echo a; touch pwned", sandbox=mode), tmp_path)
    assert r.output.strip() == "a; touch pwned" and not (tmp_path / "pwned").exists()


@pytest.mark.slow
def test_the_environment_is_an_allow_list_without_autod_secrets(tmp_path, mode, monkeypatch):
    monkeypatch.setenv("AUTOD_LLM__API_KEY", "sk-the-daemon-key")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", "/run/credentials/autod.service")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.setenv("INVOCATION_ID", "abc")
    monkeypatch.setenv("SOME_TOKEN", "hunter2")
    monkeypatch.setenv("PYTHONPATH", "/evil")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    cfg = CheckConfig(run=f'{sys.executable} -c "{code}"', sandbox=mode)
    r = run(cfg, tmp_path, extra_env={"EXTRA": "1"})

    env = json.loads(r.output)
    for name in ("AUTOD_LLM__API_KEY", "CREDENTIALS_DIRECTORY", "NOTIFY_SOCKET", "WATCHDOG_USEC",
                 "INVOCATION_ID", "SOME_TOKEN"):
        assert name not in env
    # PYTHONPATH is autod's judge directory alone (its import guard and recorder), never the daemon's
    assert "/evil" not in env.get("PYTHONPATH", "")
    assert [Path(p).name for p in env["PYTHONPATH"].split(os.pathsep)] == ["lib"]
    assert "sk-the-daemon-key" not in r.output
    assert env["LC_ALL"] == "C.UTF-8" and env["EXTRA"] == "1"
    assert env["HOME"] != os.environ.get("HOME") and env["TMPDIR"]


def test_a_missing_program_is_a_start_error_not_an_exception(tmp_path):
    r = run(CheckConfig(run="no-such-program-autod --x"), tmp_path)
    assert r.exit_code == 127 and r.error and "no-such-program-autod" in r.output


def test_a_file_that_is_not_executable_is_exit_126(tmp_path):
    (tmp_path / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    r = run(CheckConfig(run="./tool.sh"), tmp_path)
    assert r.exit_code == 126 and r.error and "not an executable" in r.error


def test_the_workspace_venv_comes_before_path(tmp_path):
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    tool = bin_dir / "python"
    tool.write_text('#!/bin/sh\necho "venv-python $VIRTUAL_ENV"\necho "PATH=$PATH"\n')
    tool.chmod(0o755)
    assert find_venv(tmp_path) == tmp_path / ".venv"
    assert resolve_program("python", cwd=tmp_path, venv=find_venv(tmp_path), path="/usr/bin") == tool
    r = run(CheckConfig(run="python -m pytest"), tmp_path)
    assert r.ok and f"venv-python {tmp_path / '.venv'}" in r.output
    assert f"PATH={bin_dir}{os.pathsep}" in r.output


def test_a_check_that_changes_workspace_files_is_reported_caches_aside(tmp_path, mode):
    (tmp_path / "src.py").write_text("x = 1\n")
    (tmp_path / "__pycache__").mkdir()
    script = "echo y >> src.py; echo new > made.txt; echo c > __pycache__/c.pyc"
    r = run(CheckConfig(run=f"sh -c '{script}'", sandbox=mode), tmp_path)
    # no git here: the Python file is source, the text file output (autod.checks.sourcefiles)
    assert r.ok and r.changed == ["src.py"] and r.outputs == ["made.txt"]
    assert run(CheckConfig(run="true", sandbox=mode), tmp_path).changed == []


# -- the sandbox's walls, with the real bwrap --------------------------------------------------


def test_a_check_cannot_plant_fsmonitor_in_git_config(tmp_path, real_bwrap):
    git = tmp_path / ".git"
    git.mkdir()
    (git / "config").write_text("[core]\n\tbare = false\n")
    script = (
        "printf '[core]\\n\\tfsmonitor = /tmp/evil.sh\\n' >> .git/config;"
        " mkdir -p .git/hooks; echo x > .git/hooks/post-commit"
    )
    r = run(CheckConfig(run=f'sh -c "{script}"', sandbox="bwrap"), tmp_path)
    assert not r.ok and "Read-only file system" in r.output
    assert "fsmonitor" not in (git / "config").read_text()
    assert not (git / "hooks" / "post-commit").exists()


def test_the_sandbox_hides_the_state_dir_and_writes_nothing_outside(tmp_path, real_bwrap):
    ws = tmp_path / "ws"
    (ws / ".autod").mkdir(parents=True)
    (ws / ".autod" / "state.db").write_text("secret state")
    outside, in_etc = tmp_path / "outside.txt", Path(f"/etc/autod-test-{uuid.uuid4().hex}")
    script = f"ls -A .autod; cat .autod/state.db; echo pwned > {outside}; echo pwned > {in_etc}"
    try:
        r = run(CheckConfig(run=f"sh -c '{script}'", sandbox="bwrap"), ws)
        assert "secret state" not in r.output
        assert not outside.exists() and not in_etc.exists()
    finally:
        in_etc.unlink(missing_ok=True)


def test_output_dir_is_writable_inside_the_sandbox(tmp_path, real_bwrap):
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    r = run(CheckConfig(run="sh -c 'echo $0 > \"$1\"/r.txt'", sandbox="bwrap"), ws,
            extra_args=["hello", str(out)], output_dir=out)
    assert r.ok, r.output
    assert (out / "r.txt").read_text().strip() == "hello"


def _listener() -> tuple[socket.socket, list[int]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, accepted


@pytest.mark.slow
def test_no_network_unless_the_check_opts_in(tmp_path, real_bwrap):
    srv, accepted = _listener()
    port = srv.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')"
    try:
        r = run(CheckConfig(run=f'{sys.executable} -c "{code}"', sandbox="bwrap"), tmp_path)
        assert "CONNECTED" not in r.output and not accepted
        r = run(CheckConfig(run=f'{sys.executable} -c "{code}"', sandbox="bwrap", network=True), tmp_path)
        assert "CONNECTED" in r.output
    finally:
        srv.close()


# -- when bwrap does not work ------------------------------------------------------------------


@pytest.fixture
def broken_bwrap(monkeypatch):
    monkeypatch.setattr(sandbox, "_verdict", sandbox.Verdict(False, None, "bwrap not found on PATH"))


def test_bwrap_mode_refuses_to_run_without_a_working_bwrap(tmp_path, broken_bwrap):
    r = run(CheckConfig(run="touch ran", sandbox="bwrap"), tmp_path)
    assert r.error and "bwrap not found" in r.error and r.exit_code == 126
    assert not (tmp_path / "ran").exists()


def test_auto_mode_runs_unsandboxed_and_says_so(tmp_path, broken_bwrap):
    r = run(CheckConfig(run="touch ran"), tmp_path)
    assert r.ok and r.sandbox == "unsandboxed" and (tmp_path / "ran").exists()


def test_a_program_in_a_hidden_place_is_bound_back_read_only(tmp_path, real_bwrap):
    # /tmp is private in the sandbox, so a tool outside the workspace there is hidden like one
    # under /root/.local: the runner binds the resolved program (and its interpreter) back.
    tools, ws = tmp_path / "tools", tmp_path / "ws"
    tools.mkdir()
    ws.mkdir()
    tool = tools / "tool"
    script = "#!/bin/sh\necho tool-ran; echo appended >> \"$0\"\n"
    tool.write_text(script)
    tool.chmod(0o755)
    r = run(CheckConfig(run=str(tool), sandbox="bwrap"), ws)
    assert "tool-ran" in r.output and not r.error, r.output
    assert tool.read_text() == script  # bound read-only


def test_start_up_says_loudly_when_checks_run_unsandboxed(tmp_path):
    from structlog.testing import capture_logs

    from autod.config.settings import Settings

    settings = Settings(workspace=tmp_path, checks={"tests": {"run": "pytest"}, "lint": {"run": "ruff"}})
    st = {"mode": "auto", "bwrap": None, "works": False, "why": "bwrap not found on PATH",
          "unsandboxed_checks": ["lint", "tests"], "refused_checks": []}
    with capture_logs() as logs:
        sandbox.log_startup(st)
    (line,) = logs
    assert line["event"] == "sandbox.unavailable" and line["log_level"] == "warning"
    assert line["why"] == "bwrap not found on PATH" and line["unsandboxed_checks"] == ["lint", "tests"]
    assert sandbox.describe(st).startswith("sandbox: UNAVAILABLE (bwrap not found on PATH)")
    assert settings.checks_sandbox == "auto"


def test_files_the_command_names_outside_the_workspace_are_readable_not_writable(tmp_path, real_bwrap):
    ws, script = tmp_path / "ws", tmp_path / "ci" / "check.py"
    ws.mkdir()
    script.parent.mkdir()
    script.write_text(
        "import pathlib, sys\nprint('ci-check-ran')\npathlib.Path(sys.argv[0]).write_text('x')\n"
    )
    r = run(CheckConfig(run=f"{sys.executable} {script}", sandbox="bwrap"), ws)
    assert "ci-check-ran" in r.output and "Read-only file system" in r.output
    assert "ci-check-ran" in script.read_text()


@pytest.mark.slow
def test_a_venv_python_in_a_hidden_place_keeps_its_venv_in_the_sandbox(tmp_path, mode):
    """A check run by a venv's python that lives under /tmp or a home dir (hidden in the sandbox) gets
    that venv, not the base interpreter with its own site-packages (found in CI: a clone under /tmp
    ran its checks with the system python and its pytest plugins)."""
    import subprocess

    venv = tmp_path / "tools" / "venv"  # under /tmp: the sandbox's private /tmp hides it
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "autod_venv_marker.py").write_text("WHERE = 'the venv'\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    code = "import sys, autod_venv_marker as m; print(m.WHERE, sys.prefix)"
    r = run(CheckConfig(run=f"{venv}/bin/python -c '{code}'", sandbox=mode), ws)
    assert r.ok and f"the venv {venv}" in r.output, r.output


def test_a_checks_own_pythonpath_and_pytest_plugins_are_kept_beside_autods(tmp_path):
    names = "('PYTHONPATH', 'PYTEST_PLUGINS', 'PYTEST_ADDOPTS')"
    code = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {names}}}))"
    cfg = CheckConfig(run=f'{sys.executable} -c "{code}"', sandbox="off",
                      env={"PYTHONPATH": "src", "PYTEST_PLUGINS": "pytest_asyncio", "PYTEST_ADDOPTS": "-x"})
    env = json.loads(run(cfg, tmp_path).output)
    assert env["PYTHONPATH"].split(os.pathsep)[1:] == ["src"]
    assert env["PYTEST_PLUGINS"] == "pytest_asyncio,autod_verdicts"
    assert env["PYTEST_ADDOPTS"] == "-p autod_verdicts -x"  # loaded before the check's own plugins
