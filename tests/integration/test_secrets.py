"""The LLM key, set through YAML, the environment or a systemd credential file, reaches the server
in the Authorization header and nowhere else.

Run 1: llm.api_key in the YAML. Run 2: AUTOD_LLM__API_KEY, then a credential file
($CREDENTIALS_DIRECTORY/llm_api_key) picked up by SIGHUP. In each, one plan is stored as a proposal
(require_confirmation on) and one request fails with a 401 whose body echoes the key, as some
proxies do. Then the key is searched for in the log file, stderr, `autod status --json`,
`history --json`, `proposals --json`, `logs --json`, the server's logged request bodies, and every
byte of every file under the state dir.
"""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path
from typing import Any

import pytest
from daemon import FIX_PLAN, Autod, base_config, run_cli, write_config
from llmserver import ScriptedLLM

from autod.config.settings import load_config
from autod.control.socket import socket_path

pytestmark = pytest.mark.slow

KEY_YAML = "sk-yaml-5e1f0c9a7b3d42c8"
KEY_ENV = "sk-env-93b2d7e4a1f06c55"
KEY_CRED = "sk-cred-0d4c8b6f2e7a9135"


def echo_401(key: str) -> dict[str, Any]:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}})
    return {"status": 401, "body": body}


def config_for(tmp_path: Path, repo: Path, llm: ScriptedLLM, **llm_extra: Any) -> Path:
    cfg = base_config(
        repo,
        modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}, "auto-plan": {"enabled": False}},
        llm={
            "base_url": llm.base_url,
            "timeout_s": 10,
            "request_timeout_s": 5,
            "max_retries": 0,
            **llm_extra,
        },
        limits={"min_interval_s": 0, "max_cycles_per_hour": 1000, "require_confirmation": True},
    )
    cfg["state_dir"] = str(tmp_path / "state")
    return write_config(tmp_path / "autod.yaml", cfg)


def everything_said(
    d: Autod, config: Path, state: Path, server_log: Path, env: dict[str, str]
) -> dict[str, str]:
    """Every place a key could leak to, by name."""
    said = {"log file": d.log_file.read_text(errors="replace"), "stderr": d.stderr()}
    for args in (
        ("status", "--json"),
        ("history", "--json"),
        ("proposals", "--json"),
        ("logs", "--json", "-n", "500"),
    ):
        out = run_cli(*args, "-c", str(config), env=env)
        assert out.returncode == 0, (args, out.stderr)
        said[" ".join(args)] = out.stdout + out.stderr
    said["server request bodies"] = server_log.read_text()
    for p in sorted(state.rglob("*")):
        if p.is_file():
            said[f"state file {p.relative_to(state)}"] = p.read_bytes().decode("latin-1")
    return said


def assert_nowhere(key: str, said: dict[str, str]) -> None:
    leaks = [where for where, text in said.items() if key in text or key[-12:] in text]
    assert not leaks, f"the key leaked into: {leaks}"


def test_yaml_key_is_only_in_the_authorization_header(tmp_path, calc_repo):
    server_log = tmp_path / "requests.jsonl"
    with ScriptedLLM(log_path=server_log) as llm:
        llm.push(echo_401(KEY_YAML))
        config = config_for(tmp_path, calc_repo, llm, api_key=KEY_YAML)
        d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
        try:
            (r,) = d.wait_reflections(1)
            assert r["status"] == "failed" and "401" in r["reason"] and "Incorrect API key" in r["reason"], r
            assert "***" in r["reason"]  # the echoed key was there, and was redacted
            llm.set_default({"plan": FIX_PLAN})
            assert run_cli("trigger", "auto-debug", "-c", str(config)).returncode == 0
            r = d.wait_reflections(2)[1]
            assert r["status"] == "pending_approval", r
            said = everything_said(d, config, tmp_path / "state", server_log, {})
            # who can talk to the daemon at all: only its user (control socket 0600, state dir 0700)
            sock = socket_path(load_config(config))
            assert stat.S_IMODE(sock.stat().st_mode) == 0o600
            assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
        finally:
            assert d.stop() == 0
        said["stderr"] = d.stderr()
        assert {h.get("authorization") for h in llm.headers} == {f"Bearer {KEY_YAML}"}
    assert_nowhere(KEY_YAML, said)
    assert "pending" in said["proposals --json"]  # the proposal is there, without the key


def test_env_key_then_credential_file_after_sighup_are_only_in_the_authorization_header(tmp_path, calc_repo):
    server_log = tmp_path / "requests.jsonl"
    creds = tmp_path / "creds"
    creds.mkdir(mode=0o700)
    env = {"AUTOD_LLM__API_KEY": KEY_ENV, "CREDENTIALS_DIRECTORY": str(creds)}
    with ScriptedLLM(log_path=server_log) as llm:
        llm.push({"plan": FIX_PLAN})
        config = config_for(tmp_path, calc_repo, llm)
        d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl", env=env).start()
        try:
            (r,) = d.wait_reflections(1)
            assert r["status"] == "pending_approval", r
            assert llm.headers[-1]["authorization"] == f"Bearer {KEY_ENV}"

            # the credential file wins over the environment once the daemon reloads
            (creds / "llm_api_key").write_text(KEY_CRED + "\n")
            d.signal(signal.SIGHUP)
            d.wait_for(lambda recs: [x for x in recs if x.get("event") == "config.reloaded"], 30, "reload")
            llm.push(echo_401(KEY_CRED))
            assert run_cli("trigger", "auto-debug", "-c", str(config), env=env).returncode == 0
            r = d.wait_reflections(2)[1]
            assert r["status"] == "failed" and "401" in r["reason"] and "***" in r["reason"], r
            assert llm.headers[-1]["authorization"] == f"Bearer {KEY_CRED}"
            said = everything_said(d, config, tmp_path / "state", server_log, env)
        finally:
            assert d.stop() == 0
        said["stderr"] = d.stderr()
    assert_nowhere(KEY_ENV, said)
    assert_nowhere(KEY_CRED, said)
