"""Whatever the CLI prints (warnings, errors, config check output, JSON) is redacted as the daemon's log
is: the configured secrets in every form the secret pattern knows, credential-looking values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autod.cli import main as cli

KEY = "probeCkey0123456789abcdefSECRET"


@pytest.fixture(autouse=True)
def _no_credentials_dir(monkeypatch):
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    monkeypatch.delenv("AUTOD_LLM__API_KEY", raising=False)


def config(tmp_path: Path) -> Path:
    key_file = tmp_path / "key.txt"
    key_file.write_text(KEY + "\n")
    path = tmp_path / "autod.yaml"
    path.write_text(f"workspace: {tmp_path}\nllm:\n  api_key_file: {key_file}\n")
    return path


def test_a_config_check_warning_quoting_the_key_prints_it_as_stars(
    tmp_path, capsys, monkeypatch
):
    path = config(tmp_path)
    header = b"Bearer " + KEY.encode() + b"Z"
    quoted = f"LocalProtocolError: Illegal header value {header!r} (key {KEY[::-1]})"
    # what `autod config check` said when the LLM probe quoted the header it could not send
    monkeypatch.setattr("autod.runtime.outage.unreachable_now", lambda _s: f"llm.base_url: ({quoted})")
    assert cli.main(["config", "check", "-c", str(path)]) == 0
    out = capsys.readouterr()
    assert "Illegal header value b'Bearer ***" in out.err and "(key ***)" in out.err
    assert KEY not in out.err + out.out and KEY[::-1] not in out.err


def test_json_output_loses_the_key_in_every_form(tmp_path, capsys):
    from autod.cli.common import _emit, _settings

    path = config(tmp_path)
    _settings(cli.build_parser().parse_args(["status", "-c", str(path)]))  # loads: its secrets are now set
    _emit({"error": f"upstream said {json.dumps(KEY + chr(10))} and {KEY.encode().hex()}"})
    printed = capsys.readouterr().out
    assert "upstream said" in printed and KEY not in printed and KEY.encode().hex() not in printed
