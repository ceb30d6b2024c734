"""A check whose program or script the sandbox cannot show is a start error naming the path and the
rule that hides it (real bubblewrap), never a failing run for the planner."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from autod.checks.run import run_check
from autod.config.settings import CheckConfig


@pytest.fixture
def hidden_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the daemon's home: hidden from every check
    return home


def start_error(run: str, ws: Path) -> str:
    result = asyncio.run(run_check("lint", CheckConfig(run=run, sandbox="bwrap"), ws))
    assert result.exit_code == 126 and result.error is not None, result.output
    return result.error


def test_a_script_behind_a_credential_glob_names_its_path_and_the_glob(
    tmp_path: Path, hidden_home: Path, real_bwrap: None
) -> None:
    script = hidden_home / "secret-tools" / "check.py"
    script.parent.mkdir()
    script.write_text("print('checked')\n")
    (ws := tmp_path / "ws").mkdir()
    error = start_error(f"{sys.executable} {script}", ws)
    assert str(script) in error and "credential glob '*secret*'" in error


def test_a_program_behind_a_credential_glob_names_its_path_and_the_glob(
    tmp_path: Path, hidden_home: Path, real_bwrap: None
) -> None:
    program = hidden_home / "secrets" / "lint"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\necho linted\n")
    os.chmod(program, 0o755)
    (ws := tmp_path / "ws").mkdir()
    error = start_error(str(program), ws)
    assert str(program) in error and "credential glob" in error


def test_a_later_argument_that_is_hidden_is_data_and_the_check_runs(
    tmp_path: Path, hidden_home: Path, real_bwrap: None
) -> None:
    (hidden_home / "secret.txt").write_text("CANARY")
    (ws := tmp_path / "ws").mkdir()
    (ws / "probe.py").write_text("import sys, os\nprint(os.path.getsize(sys.argv[1]))\n")
    result = asyncio.run(run_check(
        "t", CheckConfig(run=f"{sys.executable} probe.py {hidden_home / 'secret.txt'}", sandbox="bwrap"), ws
    ))
    assert result.error is None and "CANARY" not in result.output
