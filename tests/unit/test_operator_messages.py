"""What the operator is told: a bad value from the environment names its variable, `config check` says
when the LLM does not answer, and a server that is down is never logged as a busy one."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from autod.cli import main as cli
from autod.config.settings import ConfigError, LLMConfig, load_config
from autod.errors import LLMUnavailable
from autod.events import Event, EventKind
from autod.planner import PlanRequest
from autod.planner.llm import LLMPlanner


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "autod.yaml"
    path.write_text(f"workspace: {tmp_path}\nllm:\n  model: m\n  timeout_s: 10\nlimits:\n  max_retries: 3\n")
    return path


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("AUTOD_LLM__TIMEOT_S", "5", "environment variable AUTOD_LLM__TIMEOT_S: llm.timeot_s: unknown key"),
        ("AUTOD_LLM__TIMEOUT_S", "soon", "environment variable AUTOD_LLM__TIMEOUT_S: llm.timeout_s: "),
        ("AUTOD_LIMITS__MAX_RETRIES", "-1",
         "environment variable AUTOD_LIMITS__MAX_RETRIES: limits.max_retries: "),
        ("AUTOD_LLM", '{"timeot_s": 1}', "environment variable AUTOD_LLM: llm.timeot_s: unknown key"),
        ("AUTOD_LLM", "{not json", "environment variable AUTOD_LLM: llm: not valid"),
    ],
)
def test_a_bad_value_from_the_environment_names_the_variable_not_a_line_of_the_file(
    config, monkeypatch, name, value, says
):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert says in str(err.value) and "autod.yaml" not in str(err.value), str(err.value)
    assert "soon" not in str(err.value) and "not json" not in str(err.value)  # values are never echoed


def test_a_mistake_in_the_file_keeps_its_line_beside_one_from_the_environment(config, monkeypatch):
    config.write_text(config.read_text().replace("  model: m\n", "  modle: m\n"))
    monkeypatch.setenv("AUTOD_LLM", '{"model": "x"}')  # a whole section from the environment
    monkeypatch.setenv("AUTOD_LIMITS__RETRY_BASE", "5")
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert "autod.yaml:3: llm.modle: unknown key" in str(err.value), str(err.value)
    assert "environment variable AUTOD_LIMITS__RETRY_BASE: limits.retry_base: unknown key" in str(err.value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_config_check_warns_that_the_llm_does_not_answer_and_still_exits_0(config, capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"
    config.write_text(config.read_text().replace("  model: m\n", f"  model: m\n  base_url: {url}\n"
                                                 "  probe_timeout_s: 2\n"))
    assert cli.main(["config", "check", "-c", str(config)]) == 0
    err = capsys.readouterr().err
    assert f"autod: warning: llm.base_url: the LLM at {url} does not answer (ConnectError" in err, err


@pytest.mark.slow
def test_a_server_that_refuses_connections_is_down_not_a_busy_one_awaited():
    url = f"http://127.0.0.1:{free_port()}/v1"
    planner = LLMPlanner(LLMConfig(base_url=url, max_retries=2, timeout_s=30, request_timeout_s=5), None)
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f")
    request = PlanRequest(mode="auto-debug", event=event, messages=[{"role": "user", "content": "fix"}])

    async def plan() -> None:
        try:
            await planner.plan(request)
        finally:
            await planner.aclose()

    with capture_logs() as logs, pytest.raises(LLMUnavailable, match="ConnectError"):
        asyncio.run(plan())
    assert [x["event"] for x in logs if x["event"] == "llm.retry"]  # it did try again
    assert not [x for x in logs if x["event"] == "llm.busy_server_awaited"], logs
