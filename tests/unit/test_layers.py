"""The layers hold: `lint-imports` keeps the layers contract in pyproject.toml (no import runs back up,
siblings do not import each other), and every package and module of autod has its place in it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import autod

PKG = Path(autod.__file__).resolve().parent
ROOT = PKG.parent
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    return contract["layers"]


@pytest.mark.slow
def test_lint_imports_keeps_the_layers_contract() -> None:
    # the console script's own entry point, in this interpreter: CI runs the venv's python, whose
    # bin/ need not be on PATH
    done = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"lint-imports: an import against the layers:\n{done.stdout}{done.stderr}"


def test_every_package_and_module_of_autod_has_a_layer() -> None:
    placed = {name.strip() for layer in _layers() for name in re.split(r"[|:]", layer)}
    present = {
        f"autod.{p.stem if p.suffix == '.py' else p.name}"
        for p in PKG.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    }
    unplaced = sorted(present - placed)
    assert unplaced == [], f"give each a layer in pyproject.toml's layers contract: {unplaced}"
    assert sorted(placed - present) == []
