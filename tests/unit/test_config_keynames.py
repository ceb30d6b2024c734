"""A key pasted where a value belongs is never echoed by a config error: names that read like config keys
are shown whole, a configured secret is ***, anything else shows its first characters only."""

from __future__ import annotations

from pathlib import Path

import pytest

from autod.config.keynames import PREFIX, shown_key
from autod.config.settings import ConfigError, load_config

PASTED = "probeCkey0123456789abcdefSECRET"


@pytest.mark.parametrize(
    "name", ["max_cycles_per_hour", "api-key", "tier3", "timeout_s", "v2.local", "confirmation"]
)
def test_a_name_that_reads_like_a_config_key_is_shown_whole(name):
    assert shown_key(name) == name


@pytest.mark.parametrize(
    "name",
    [PASTED, "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0", "AKIAIOSFODNN7EXAMPLE", "0123456789abcdef0123",
     "550e8400-e29b-41d4-a716-446655440000", "ghp_" + "x" * 36, "a key with spaces", "clé-secrète-longue"],
)
def test_a_name_that_may_be_a_secret_shows_only_its_first_characters(name):
    shown = shown_key(name)
    assert shown.startswith(name[:PREFIX]) and name[PREFIX:PREFIX + 4] not in shown, shown


def test_a_name_holding_a_configured_secret_is_stars():
    assert shown_key(f"x{PASTED}", [PASTED]) == "***"
    assert shown_key("short", ["sh"]) == "short"  # a secret under 4 characters is matched nowhere


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "autod.yaml"
    path.write_text(f"workspace: {tmp_path}\n{body}")
    return path


@pytest.mark.parametrize(
    "body",
    [
        f"llm:\n  {PASTED}: 1\n",  # unknown key
        f"llm:\n  {PASTED}: 1\n  {PASTED}: 2\n",  # given twice
        f"checks:\n  t:\n    run: pytest\n    env:\n      {PASTED}: [1]\n",  # a key inside a value's loc
        f"limits:\n  {PASTED}:\n" + "    - " * 1 + "[" * 40 + "]" * 40 + "\n",  # nested too deep under it
    ],
    ids=["unknown", "twice", "in-loc", "too-deep"],
)
def test_a_secret_pasted_as_a_key_is_never_in_the_error(tmp_path, body):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, body))
    message = str(info.value)
    assert PASTED[PREFIX:] not in message and str(tmp_path) in message, message


def test_a_key_that_is_the_configured_api_key_is_stars_and_its_line_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    path = write(tmp_path, f"llm:\n  api_key: {PASTED}\n  {PASTED}x: 1\n")
    with pytest.raises(ConfigError, match=rf"^{path}:4: llm\.\*\*\*: unknown key$"):
        load_config(path)
