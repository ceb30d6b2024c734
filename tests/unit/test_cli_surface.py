"""The CLI explains itself: every command, option and argument has help text; `--version` works."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from autod.cli.main import build_parser


def walk(parser: argparse.ArgumentParser, path: str = "autod") -> list[tuple[str, argparse.Action]]:
    """Every action of the parser and of its subcommands, with where it is."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest for a in action._choices_actions if a.help}
            out += [(f"{path} {name}", action) for name in action.choices if name not in helped]
            for name, child in action.choices.items():
                out += walk(child, f"{path} {name}")
        else:
            out.append((path, action))
    return out


def test_every_command_option_and_argument_has_help_text():
    missing = []
    for where, action in walk(build_parser()):
        if isinstance(action, argparse._SubParsersAction):  # a subcommand listed without help
            missing.append(where)
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


@pytest.mark.slow
def test_version_prints_the_installed_version():
    from importlib.metadata import version

    cmd = [sys.executable, "-m", "autod.cli.main", "--version"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"autod {version('autod')}", out
