"""`autod config check` beyond the schema: a config that cannot work here is refused with the key to
change; modes run only when enabled; autod keeps its state dir out of `git status`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autod.cli import main as cli
from autod.config.settings import ConfigError, load_config
from autod.daemon.preflight import program_error
from autod.git.exclude import exclude_state_dir


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_a_program_is_found_in_the_workspaces_venv_before_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert program_error("no-such-tool-here", tmp_path) is not None
    executable(tmp_path / ".venv" / "bin" / "no-such-tool-here")
    assert program_error("no-such-tool-here", tmp_path) is None  # the workspace's venv, first
    assert program_error("sh", tmp_path) is None
    assert "scripts/check.sh" in (program_error("scripts/check.sh", tmp_path) or "")
    executable(tmp_path / "scripts" / "check.sh")
    assert program_error("scripts/check.sh", tmp_path) is None


def test_config_check_refuses_a_missing_program_and_watch_path_naming_line_and_key(tmp_path, capsys):
    cfg = write(
        tmp_path / "autod.yaml",
        f"workspace: {tmp_path}\n"
        "checks:\n"
        "  tests: {run: no-such-tool-here -q}\n"
        "sources:\n"
        "  - {type: watch, paths: [src]}\n"
        "  - {type: cron, schedule: '0 7 * * mon', mode: auto-doc}\n",
    )
    assert cli.main(["config", "check", "-c", str(cfg)]) == 78
    err = capsys.readouterr().err.splitlines()
    assert f"autod: {cfg}:3: checks.tests.run: program no-such-tool-here: not found in" in err[0]
    assert ".venv/bin or venv/bin, nor on PATH" in err[0]
    assert f"autod: {cfg}:5: sources.0.paths.0: watch path 'src' does not exist in {tmp_path}" in err
    assert any("warning:" in line and "auto-doc, which is not enabled" in line for line in err)
    (tmp_path / "src").mkdir()
    executable(tmp_path / ".venv" / "bin" / "no-such-tool-here")
    assert cli.main(["config", "check", "-c", str(cfg)]) == 0  # the warning alone does not fail it


def test_a_misspelt_trigger_is_named_as_a_trigger_not_a_cron_string(tmp_path):
    body = f"workspace: {tmp_path}\nchecks:\n  t: {{run: ls, when: [chnage]}}\n"
    cfg = write(tmp_path / "autod.yaml", body)
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert "checks.t.when" in str(exc.value)
    assert "unknown trigger 'chnage': use start, change, manual or a 5-field cron string" in str(exc.value)


def test_a_modes_section_runs_only_the_modes_it_names(tmp_path):
    body = f"workspace: {tmp_path}\nmodes:\n  auto-debug: {{enabled: true}}\n"
    only_debug = write(tmp_path / "a.yaml", body)
    assert load_config(only_debug).modes.enabled() == ["auto-debug"]
    no_section = write(tmp_path / "b.yaml", f"workspace: {tmp_path}\n")
    assert load_config(no_section).modes.enabled() == ["auto-debug", "auto-plan"]  # the documented defaults


def test_the_state_dir_goes_into_git_info_exclude_once_and_gitignore_is_untouched(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("build/\n")
    state = tmp_path / ".autod"
    state.mkdir()
    (state / "state.db").write_text("x")
    assert exclude_state_dir(tmp_path, state) is True
    assert exclude_state_dir(tmp_path, state) is False  # idempotent
    text = (tmp_path / ".git" / "info" / "exclude").read_text()
    assert text.count("/.autod/") == 1
    assert (tmp_path / ".gitignore").read_text() == "build/\n"
    out = subprocess.run(["git", "-C", str(tmp_path), "status", "--porcelain"], capture_output=True,
                         text=True)
    assert ".autod" not in out.stdout
    assert exclude_state_dir(tmp_path, tmp_path.parent / "elsewhere") is False  # outside: nothing to hide


def test_a_linked_worktree_excludes_through_the_main_repository(tmp_path):
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    (main / "f").write_text("x")
    git = ["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "i"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    state = tmp_path / "wt" / ".autod"
    state.mkdir()
    (state / "x").write_text("x")
    assert exclude_state_dir(tmp_path / "wt", state) is True
    assert "/.autod/" in (main / ".git" / "info" / "exclude").read_text()
    out = subprocess.run(["git", "-C", str(tmp_path / "wt"), "status", "--porcelain"], capture_output=True,
                         text=True)
    assert ".autod" not in out.stdout


def test_logs_follow_starts_from_the_last_lines_like_tail(tmp_path, monkeypatch):
    seen = {}

    def fake_run_logs(path, *, follow, as_json, flt, n, out):  # the seam: what cmd_logs asks for
        seen["n"] = n
        return 0

    monkeypatch.setattr("autod.cli.logview.run_logs", fake_run_logs)
    cfg = write(tmp_path / "autod.yaml", f"workspace: {tmp_path}\n")
    cli.main(["logs", "-f", "-c", str(cfg)])
    assert seen["n"] == cli.FOLLOW_LINES == 10
    cli.main(["logs", "-c", str(cfg)])
    assert seen["n"] == cli.READ_LINES
    cli.main(["logs", "-f", "-n", "3", "-c", str(cfg)])
    assert seen["n"] == 3
