"""A key file is one line of header-safe text, or a config error naming the file, never its content."""

from __future__ import annotations

from pathlib import Path

import pytest

from autod.cli import main as cli
from autod.config.settings import ConfigError, load_config

KEY = "probeCkey0123456789abcdefSECRET"


@pytest.fixture(autouse=True)
def _no_credentials_dir(monkeypatch):
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    for name in ("AUTOD_LLM__API_KEY", "AUTOD_LLM__API_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)


def config(tmp_path: Path, key_bytes: bytes) -> tuple[Path, Path]:
    key_file = tmp_path / "key.txt"
    key_file.write_bytes(key_bytes)
    path = tmp_path / "autod.yaml"
    path.write_text(f"workspace: {tmp_path}\nllm:\n  api_key_file: {key_file}\n")
    return path, key_file


MALFORMED = {
    "a comment line": (KEY + "\n# rotated 2024-01-01\n").encode(),
    "two keys": (KEY + "\n" + KEY[::-1] + "\n").encode(),
    "not UTF-8": KEY.encode() + b"\xe9\xff\n",
    "a control character": KEY.encode() + b"\x07tail\n",
    "past ASCII": (KEY + "é").encode(),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_key_file_is_a_config_error_naming_file_line_and_field_never_the_key(tmp_path, data):
    path, key_file = config(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: llm.api_key_file: {key_file}: "), message
    assert KEY[:8] not in message and "rotated" not in message


@pytest.mark.parametrize("data", [KEY.encode(), (KEY + "\n").encode(), (KEY + "\r\n").encode(), b"\n\n"])
def test_one_line_with_or_without_a_line_break_or_an_empty_file_loads(tmp_path, data):
    path, _ = config(tmp_path, data)
    assert load_config(path).api_key() == (KEY if data.strip() else None)


def test_a_malformed_systemd_credential_or_config_value_is_named_too(tmp_path, monkeypatch):
    path, _ = config(tmp_path, KEY.encode())
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "llm_api_key").write_text(KEY + "\nsecond\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    with pytest.raises(ConfigError, match=rf"^{path}: credential llm_api_key: .*2 non-empty lines"):
        load_config(path)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    path.write_text(f'workspace: {tmp_path}\nllm:\n  api_key: "{KEY}\\nmore"\n')
    with pytest.raises(ConfigError, match=rf"^{path}:3: llm.api_key: holds 2"):
        load_config(path)


@pytest.mark.parametrize("command", [["config", "check"], ["run", "--once"]])
def test_the_cli_exits_78_on_a_malformed_key_file_and_prints_no_part_of_it(tmp_path, capsys, command):
    path, key_file = config(tmp_path, (KEY + "\n# rotated 2024-01-01\n").encode())
    code = cli.main([*command, "-c", str(path)])
    out = capsys.readouterr()
    assert code == 78, out.err
    assert str(key_file) in out.err and KEY[:8] not in out.out + out.err
