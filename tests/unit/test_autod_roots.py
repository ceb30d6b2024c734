"""Which directories of autod's a check never sees (autod.checks.roots)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autod.checks.roots import autod_roots
from autod.checks.sandbox import Policy, mount_table


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


def test_the_workspace_is_never_a_root_and_stays_visible_below_one(tmp_path: Path) -> None:
    ws = tmp_path / "autod"  # a checkout named autod, its state dir inside it
    roots = autod_roots(ws, ws / ".autod", ws / ".autod" / "logs" / "autod.jsonl")
    assert ws not in roots and ws / ".autod" in roots
    # a workspace kept below an instance's directory: the root is hidden, the workspace bound back
    ws, state = tmp_path / "var/lib/autod/a/ws", tmp_path / "var/lib/autod/a"
    ws.mkdir(parents=True)
    (tmp_path / "var/lib/autod/b").mkdir()
    policy = Policy(state_dir=state, hidden=autod_roots(ws, state, state / "autod.jsonl"))
    table = mount_table(ws, policy)
    assert not table.hidden(ws) and table.hidden(tmp_path / "var/lib/autod/b")


def test_instances_side_by_side_hide_each_other(tmp_path: Path) -> None:
    for name in ("autod-a", "autod-b", "postgres"):
        (tmp_path / "lib" / name).mkdir(parents=True)
    roots = autod_roots(tmp_path / "ws", tmp_path / "lib" / "autod-a", tmp_path / "log" / "autod.jsonl")
    assert tmp_path / "lib" / "autod-b" in roots and tmp_path / "lib" / "postgres" not in roots
