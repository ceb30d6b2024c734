"""Hostile code in the workspace, through `autod run` with the real bubblewrap.

1. A planted conftest.py (test code a plan or a stranger wrote) runs in autod's start-up check and
   tries what it can: write outside the workspace, read ~/.ssh/id_rsa, reach a 127.0.0.1 listener,
   plant .git/hooks/post-commit, read the LLM key and the credentials dir, and leave a `setsid`
   child behind (under bwrap, and under `sandbox: off`).
2. A repository planted before autod starts with core.fsmonitor, a post-commit hook, a clean filter
   and a textconv driver, fixed and committed by autod with `git.commit: true`: none of them runs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, git, make_calc_repo, write_config
from procs import alive_with

pytestmark = pytest.mark.slow

CONFTEST = '''
import json, os, pathlib, socket, subprocess

ATTACK = os.environ.get("ATTACK", "")
here = pathlib.Path(__file__).parent
report = {"attack": ATTACK, "env": dict(os.environ)}


def attempt(name, fn):
    try:
        report[name] = fn()
    except Exception as exc:
        report[name] = "refused: %s: %s" % (type(exc).__name__, exc)


if ATTACK == "all":
    attempt("outside", lambda: pathlib.Path(OUTSIDE).write_text("pwned") and "written")
    attempt("ssh_home", lambda: pathlib.Path(os.path.expanduser("~/.ssh/id_rsa")).read_text())
    attempt("ssh_path", lambda: pathlib.Path(SSH_KEY).read_text())
    attempt("credential", lambda: pathlib.Path(CREDENTIAL).read_text())
    attempt("net", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3).sendall(b"hi") or "sent")

    def hook():
        p = here / ".git" / "hooks" / "post-commit"
        p.write_text("#!/bin/sh\\ntouch " + OUTSIDE + "\\n")
        p.chmod(0o755)
        return "planted"

    attempt("hook", hook)

# A session of its own: the old process-group kill never reached it.
subprocess.Popen(["sh", "-c", "sleep 300; true", MARKER + "-" + ATTACK], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
(here / ("attack-%s.json" % ATTACK)).write_text(json.dumps(report))
'''


class Listener:
    """A 127.0.0.1 TCP listener that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def hostile_repo(root: Path, consts: dict[str, Any]) -> Path:
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    header = "".join(f"{k} = {v!r}\n" for k, v in consts.items())
    (repo / "conftest.py").write_text(header + CONFTEST)
    (repo / ".gitignore").write_text(".autod/\n__pycache__/\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    return repo


def test_planted_test_code_cannot_escape_the_check_sandbox(tmp_path, scripted_llm):
    marker = f"autod-hostile-{uuid.uuid4().hex}"
    key = f"sk-hostile-{uuid.uuid4().hex}"
    home, creds = tmp_path / "home", tmp_path / "creds"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"PRIVATE-KEY-{marker}\n")
    creds.mkdir()
    (creds / "llm_api_key").write_text(key)
    listener = Listener()
    outside = tmp_path / "outside.txt"
    repo = hostile_repo(tmp_path, {
        "OUTSIDE": str(outside), "SSH_KEY": str(home / ".ssh" / "id_rsa"),
        "CREDENTIAL": str(creds / "llm_api_key"), "PORT": listener.port, "MARKER": marker,
    })
    pytest_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    cfg = base_config(repo, checks={
        "sandbox": "bwrap",  # no silent fallback: a broken bwrap fails this test
        "tests": {"run": pytest_cmd, "timeout_s": 120, "when": ["start"], "env": {"ATTACK": "all"}},
        "tests-off": {"run": pytest_cmd, "timeout_s": 120, "when": ["start"], "env": {"ATTACK": "setsid"},
                      "sandbox": "off"},
    })
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    env = {"HOME": str(home), "AUTOD_LLM__API_KEY": key, "CREDENTIALS_DIRECTORY": str(creds)}
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl", env=env, args=("--once",))
    try:
        d.start()
        assert d.proc is not None
        code = d.proc.wait(180)
        assert code == 0, d.stderr()[-3000:]
        (said,) = [r for r in d.records() if r.get("event", "").startswith("sandbox.")]
        assert said["event"] == "sandbox.disabled" and said["unsandboxed_checks"] == ["tests-off"]
        # both runs of the planted code happened (else the assertions below prove nothing)
        hostile = json.loads((repo / "attack-all.json").read_text())
        off = json.loads((repo / "attack-setsid.json").read_text())

        assert not outside.exists(), "wrote outside the workspace"
        for name in ("ssh_home", "ssh_path"):
            assert hostile[name].startswith("refused"), f"read ~/.ssh/id_rsa via {name}"
        assert listener.accepted == 0 and hostile["net"].startswith("refused"), "reached 127.0.0.1"
        assert hostile["hook"].startswith("refused")
        assert not (repo / ".git" / "hooks" / "post-commit").exists()
        for report in (hostile, off):
            assert "AUTOD_LLM__API_KEY" not in report["env"] and "CREDENTIALS_DIRECTORY" not in report["env"]
            assert key not in json.dumps(report)
        assert hostile["credential"].startswith("refused")
        assert key not in json.dumps(scripted_llm.requests)
        assert not alive_with(marker), "a setsid child outlived its check"
    finally:
        d.kill()
        listener.close()
        for pid in alive_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_repository_planted_with_git_hooks_fsmonitor_and_drivers_runs_none_when_autod_commits(
    tmp_path, scripted_llm
):
    repo = make_calc_repo(tmp_path / "repo")
    canary = tmp_path / "canary.log"
    tools = tmp_path / "tools"
    tools.mkdir()

    def script(name: str, body: str = "") -> str:
        p = tools / name
        p.write_text(f'#!/bin/sh\necho "{name} $*" >> {canary}\n{body}')
        p.chmod(0o755)
        return str(p)

    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\necho post-commit >> {canary}\n")
    hook.chmod(0o755)
    (repo / ".gitattributes").write_text("*.py filter=canary diff=canary\n")
    git(repo, "add", ".gitattributes")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "attributes")
    for k, v in {
        "core.fsmonitor": script("fsmonitor", "exit 1\n"),
        "filter.canary.clean": script("clean", "cat\n"),
        "filter.canary.smudge": script("smudge", "cat\n"),
        "diff.canary.textconv": script("textconv", 'cat "$1"\n'),
    }.items():
        git(repo, "config", k, v)
    canary.unlink(missing_ok=True)

    scripted_llm.push_plan(FIX_PLAN)
    cfg = base_config(repo, git={"commit": True})
    cfg["checks"]["tests"]["when"] = ["start"]
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl", args=("--once",))
    try:
        d.start()
        assert d.proc is not None
        assert d.proc.wait(180) == 0, d.stderr()[-3000:]
        (r,) = d.reflections()
        assert r["status"] == "fixed" and r["commit"], r
        assert (repo / "src" / "calc.py").read_text() == CALC_BUGGY.replace("a - b", "a + b")
        assert f"Autod-Cycle: {r['cycle_id']}" in git(repo, "log", "-1", "--format=%B")
        assert not canary.exists(), canary.read_text()
    finally:
        d.kill()
