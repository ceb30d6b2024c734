"""What `autod config check` (and the daemon at start-up) checks beyond the schema: that the config can
work here. Watch paths exist in the workspace, every check's program can be found (in the workspace's
own venv first, then on PATH, as the check runner looks), and no source schedules a disabled mode.

Each problem names the key to change; `format_problem` adds the file and line.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from autod.checks.run import ProgramError, find_venv, resolve_program
from autod.config.errors import Problem
from autod.config.settings import CronSource, Settings, WatchSource, key_lines


def program_error(program: str, workspace: Path) -> str | None:
    """Why a check's program cannot start here, or None: resolved as the check runner resolves it (the
    workspace's `.venv/bin` or `venv/bin` first, then autod's PATH)."""
    try:
        path = os.environ.get("PATH", os.defpath)
        resolve_program(program, cwd=workspace, venv=find_venv(workspace), path=path)
    except ProgramError as exc:
        return f"program {exc}"
    return None


def check_problems(settings: Settings, *, probe: bool = False) -> list[Problem]:
    """Checks whose command cannot start: its program is not found, the line cannot be split, or (with
    a working bwrap: probed when `probe`, else only if already known) it leads into a place the
    sandbox hides."""
    from autod.checks.run import sandbox_problem

    out: list[Problem] = []
    for name, check in settings.checks.items():
        key = ("checks", name, "run")
        try:
            argv = shlex.split(check.run)
        except ValueError as exc:
            out.append(Problem(key, f"cannot split the command line ({exc})"))
            continue
        if not argv:
            out.append(Problem(key, "empty command"))
            continue
        why = program_error(argv[0], settings.workspace)
        if why is not None:
            out.append(Problem(key, why))
        elif hidden := sandbox_problem(name, check, settings, probe=probe):
            out.append(Problem(key, hidden[0], error=hidden[1]))
    return out


def problems(settings: Settings) -> list[Problem]:
    """Every problem that would make part of this config do nothing (errors) or surprise (warnings)."""
    out = check_problems(settings, probe=True)
    enabled = settings.modes.enabled()
    for i, src in enumerate(settings.sources):
        if isinstance(src, WatchSource):
            for j, rel in enumerate(src.paths):
                if not (settings.workspace / rel).exists():
                    out.append(Problem(("sources", i, "paths", j),
                                       f"watch path {rel!r} does not exist in {settings.workspace}"))
        elif isinstance(src, CronSource) and src.mode not in enabled:
            out.append(Problem(("sources", i, "mode"),
                               f"schedules {src.mode}, which is not enabled: the source is not started",
                               error=False))
    from autod.delivery.checkup import problems as delivery_problems

    return out + delivery_problems(settings)


def format_problem(settings: Settings, problem: Problem) -> str:
    """`FILE:LINE: field: message`, as for schema errors."""
    where = str(settings.config_file) if settings.config_file else "<config>"
    lines = key_lines(settings.config_file) if settings.config_file else {}
    probe = problem.key
    while probe:
        if probe in lines:
            where += f":{lines[probe]}"
            break
        probe = probe[:-1]
    field = ".".join(str(k) for k in problem.key)
    return f"{where}: {field}: {problem.message}"
