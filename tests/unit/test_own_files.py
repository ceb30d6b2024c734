"""autod's own files: the config in the workspace is flagged, and every command makes its files private."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from autod.cli import main as cli


def make_config(cfg: Path, ws: Path, state: Path | None = None) -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f"workspace: {ws}\n" + (f"state_dir: {state}\n" if state else ""))
    return cfg


def test_config_check_and_status_warn_when_the_config_lives_in_the_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "repo"
    inside = make_config(ws / "config" / "autod.yaml", ws)
    assert cli.main(["config", "check", "-c", str(inside)]) == 0
    assert cli.main(["status", "-c", str(inside)]) == 0
    err = capsys.readouterr().err
    line = f"autod: warning: the config {inside} lives inside the workspace: a plan can never edit it"
    assert err.count(line) == 2 and "a human commit can" in err
    assert cli.main(["status", "--json", "-c", str(inside)]) == 0
    assert "lives inside the workspace" in json.loads(capsys.readouterr().out)["warnings"][0]

    outside = make_config(tmp_path / "etc" / "autod.yaml", ws)
    assert cli.main(["config", "check", "-c", str(outside)]) == 0
    assert "warning" not in capsys.readouterr().err


def modes(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath, name)
            out[str(p.relative_to(root))] = stat.S_IMODE(p.lstat().st_mode)
    return out


def test_pause_and_trigger_before_the_first_start_make_a_private_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cfg = make_config(tmp_path / "autod.yaml", tmp_path / "ws", state)
    old = os.umask(0o022)  # a permissive login umask, as a shell would have
    try:
        assert cli.main(["pause", "-c", str(cfg)]) == 0
        assert cli.main(["trigger", "auto-plan", "-c", str(cfg)]) == 0
        assert os.umask(0o022) == 0o022  # the command's private umask did not leak out of it
    finally:
        os.umask(old)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    found = modes(state)
    assert {"state.db", "queue.db"} <= set(found)
    assert all(m == 0o600 for m in found.values()), found
