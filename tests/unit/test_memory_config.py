"""The memory's fleet settings: the server token's sources and redaction, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from autod import logs
from autod.config.settings import MemoryConfig, Settings


def settings(tmp_path: Path, **memory: object) -> Settings:
    return Settings(workspace=tmp_path, memory=MemoryConfig(**memory))


def test_token_comes_from_the_credential_then_the_file_then_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    token_file = tmp_path / "token"
    token_file.write_text("from-the-file\n")
    s = settings(tmp_path, auth_token="from-the-value", auth_token_file=token_file)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    assert s.memory_token() == "from-the-file"
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    (creds / "memory_token").write_text("from-the-credential\n")
    assert s.memory_token() == "from-the-credential"
    (creds / "memory_token").write_text("")  # install.sh's empty placeholder: not set there
    assert s.memory_token() == "from-the-file"
    (creds / "memory_token").unlink()
    token_file.unlink()
    assert s.memory_token() == "from-the-value"


def test_the_token_is_redacted_from_every_log_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    s = settings(tmp_path, url="http://chroma.internal:8000", auth_token="s3cret-fleet-token")
    assert "s3cret-fleet-token" in s.secrets()
    logfile = tmp_path / "autod.jsonl"
    logs.configure_logging(file=logfile, stderr=False, secrets=s.secrets())
    logs.get_logger("memory").warning("memory.degraded", why="server said: bad token s3cret-fleet-token")
    logs.flush()
    text = logfile.read_text()
    assert "s3cret-fleet-token" not in text and "***" in text


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "chroma.internal:8000"},  # no scheme
        {"url": "http://chroma.internal:8000/api/v2"},  # a path: chromadb uses host and port only
        {"collection_prefix": "-bad"},
        {"tenant": "a"},
        {"database": "has space"},
        {"retry_min_s": 5, "retry_max_s": 1},
        {"timeout_s": 0},
        {"recall_from_others": "observations"},
        {"prune_scope": "theirs"},
    ],
)
def test_settings_that_cannot_work_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MemoryConfig(**bad)
