"""Known secret values never reach an Event payload, a re-plan prompt or memory, whatever a check prints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from autod import logs
from autod.checks import CheckResult
from autod.config import load_config
from autod.modes import Verification
from autod.sources.check import failure_event

KEY = "sk-live-9f8e7d6c5b4a39281706"


@pytest.fixture
def secrets_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setenv("AUTOD_LLM__API_KEY", KEY)
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(
        f"workspace: {tmp_path}\nllm: {{base_url: 'http://127.0.0.1:1/v1',"
        " fallback: {base_url: 'http://127.0.0.1:2/v1', api_key: 'fallback-secret-123'}}\n"
    )
    found = load_config(cfg).secrets()
    logs.set_secrets(found)
    yield found
    logs.set_secrets([])


def test_settings_secrets_finds_every_key_in_force(secrets_set: list[str]) -> None:
    assert KEY in secrets_set and "fallback-secret-123" in secrets_set


def test_a_failing_checks_output_loses_the_key_before_it_becomes_an_event(secrets_set: list[str]) -> None:
    out = f'E   AssertionError: token was {KEY}\n  File "src/app.py", line 3\nfallback-secret-123\n1 failed\n'
    event = failure_event(CheckResult("tests", 1, out, 5))
    text = event.model_dump_json()
    assert KEY not in text and "fallback-secret-123" not in text
    assert "***" in event.payload["excerpt"]
    assert event.payload["locations"] == [{"path": "src/app.py", "line": 3}]


def test_the_replan_sees_check_output_without_the_key(secrets_set: list[str]) -> None:
    v = Verification("rolled_back", [CheckResult("tests", 1, f"printing {KEY}", 5)])
    assert KEY not in v.output and "***" in v.output
