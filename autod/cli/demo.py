"""`autod run` in an empty directory with no config anywhere: a small demo project is written there
first, so the first run shows a check that passes, one that fails, and the offline planner fixing it.

Only then: the directory holds nothing at all (not even a dotfile), no `-c`, `$AUTOD_CONFIG`,
`$AUTOD_WORKSPACE` or search-path file names a config, and it is a daemon (`run --once` is for CI and
cron, where an empty directory is a mistake: it still exits 2 saying there are no checks). The demo's
checks need pytest and ruff (autod's `[dev]` extra); without them nothing is written.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from autod.checks.programs import ProgramError, resolve_program
from autod.config.settings import find_config

MODULE = '''"""A small stock ledger: the project autod's demo watches."""

import os


def total(items):
    """The value of the stock: quantity times unit price, summed."""
    return sum(qty * price for qty, price in items)
'''

TEST = '''from inventory import total


def test_total_sums_quantity_times_price():
    assert total([(2, 3.0), (1, 4.0)]) == 10.0
'''

CONFIG = """\
# autod's demo, written by `autod run` in an empty directory. Every key, its default and bound:
# config/autod.yaml in autod's repository (README: Configuration).
workspace: .
modes:
  auto-debug: {enabled: true}   # fix failing checks; with no LLM (below) by running the fixer checks
checks:
  tests: {run: python -m pytest -q -p no:cacheprovider, timeout_s: 120, when: [start, change]}
  lint: {run: ruff check --no-cache ., timeout_s: 60, when: [start, change]}
  lint-fix: {run: ruff check --no-cache --fix ., fixer: true}   # run by the offline planner, never as a check
sources:
  - {type: watch, paths: [.]}   # a save re-runs the `change` checks
llm: {base_url: null}           # the offline rules planner; an OpenAI-compatible server: README, LLM
"""

FILES = {
    "autod.yaml": (CONFIG, "the config: checks tests and lint, the fixer lint-fix, the offline planner"),
    "inventory.py": (MODULE, "a module with an unused import: `lint` fails, `lint-fix` can fix it"),
    "test_inventory.py": (TEST, "its test: `tests` passes"),
    ".gitignore": (".autod/\n__pycache__/\n", "autod's state dir and Python's caches"),
}


class DemoRefused(Exception):
    """The demo cannot be written here; the message says why and what to do."""


def wanted(explicit: str | None, cwd: Path) -> bool:
    """Whether `autod run` should write the demo into `cwd` (see the module's docstring)."""
    if find_config(explicit) is not None or os.environ.get("AUTOD_WORKSPACE"):
        return False
    try:
        with os.scandir(cwd) as entries:
            return not any(True for _ in entries)
    except OSError:
        return False


def _missing_tools(cwd: Path) -> list[str]:
    path = os.environ.get("PATH", os.defpath)
    missing = []
    try:
        python = resolve_program("python", cwd=cwd, venv=None, path=path)
    except ProgramError:
        python = None
    if python is None:
        missing.append("python")
    else:
        probe = subprocess.run([str(python), "-c", "import pytest"], cwd=cwd, capture_output=True,
                               timeout=60, check=False)
        if probe.returncode != 0:
            missing.append(f"pytest (for {python})")
    try:
        resolve_program("ruff", cwd=cwd, venv=None, path=path)
    except ProgramError:
        missing.append("ruff")
    return missing


def _git_init(cwd: Path) -> bool:
    """A repository with the demo committed: `git diff` then shows what autod changed."""
    from autod.git import safe as gitsafe

    try:
        init = subprocess.run(["git", "-c", "init.defaultBranch=main", "init", "-q", str(cwd)],
                              capture_output=True, env=gitsafe.git_env(), timeout=60, check=False)
        if init.returncode != 0:
            return False
        ident = ["-c", "user.name=autod demo", "-c", "user.email=autod@localhost"]
        if gitsafe.run(cwd, "add", "-A").returncode != 0:
            return False
        done = gitsafe.run(cwd, *ident, "commit", "--no-verify", "-q", "-m", "autod demo project")
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def write(cwd: Path) -> list[str]:
    """Write the demo into `cwd` (empty); the lines that tell the operator what was written and what
    comes next. Raises DemoRefused, writing nothing, when the demo's tools are missing."""
    missing = _missing_tools(cwd)
    if missing:
        raise DemoRefused(
            f"{cwd} is empty and no config was found, so autod would write a demo project here, but its"
            f" checks need {', '.join(missing)}: install autod with its [dev] extra"
            " (`pip install -e '.[dev]'` in autod's checkout), or write a config (README: Configuration)"
        )
    for name, (text, _) in FILES.items():
        (cwd / name).write_text(text, encoding="utf-8")
    git = _git_init(cwd)
    width = max(map(len, FILES))
    lines = [f"{cwd} is empty and no config was found: autod wrote a demo project here to watch"]
    lines += [f"  {name:<{width}}  {why}" for name, (_, why) in FILES.items()]
    if git:
        lines.append(f"  {'.git':<{width}}  the demo committed: `git diff` will show autod's fix")
    lines.append("next: the start-up checks run, `lint` fails and auto-debug fixes it (`cycle.outcome`"
                 " below); `autod history` lists the cycle; Ctrl-C stops autod")
    return lines
