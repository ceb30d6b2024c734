"""Which directories of autod's a check never sees (autod.checks.roots)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autod.checks.roots import autod_roots


@pytest.fixture(autouse=True)
def no_systemd_dirs(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("STATE_DIRECTORY", "LOGS_DIRECTORY", "CACHE_DIRECTORY", "RUNTIME_DIRECTORY"):
        monkeypatch.delenv(var, raising=False)


def test_a_per_instance_layout_hides_the_common_autod_directories(tmp_path: Path) -> None:
    state, log = tmp_path / "var/lib/autod/a", tmp_path / "var/log/autod/a/autod.jsonl"
    roots = autod_roots(tmp_path / "srv/a", state, log)
    assert tmp_path / "var/lib/autod" in roots and tmp_path / "var/log/autod" in roots


def test_a_log_outside_an_autod_directory_is_hidden_with_every_rotation(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("repo.jsonl", "repo.jsonl.1", "repo.jsonl.2.gz", "other.log"):
        (logs / name).write_text("x")
    roots = autod_roots(tmp_path / "ws", tmp_path / "state", logs / "repo.jsonl")
    hidden = {p.name for p in roots if p.parent == logs}
    assert hidden == {"repo.jsonl", "repo.jsonl.1", "repo.jsonl.2.gz"}


def test_the_workspace_and_what_is_above_it_are_never_a_root(tmp_path: Path) -> None:
    ws = tmp_path / "autod"  # a checkout named autod, its state dir inside it
    roots = autod_roots(ws, ws / ".autod", ws / ".autod" / "logs" / "autod.jsonl")
    assert ws not in roots and not any(ws.is_relative_to(r) for r in roots)
    assert ws / ".autod" in roots
