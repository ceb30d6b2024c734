"""What `autod config check` (and the daemon at start-up) checks beyond the schema: that the config can
work here. Watch paths exist in the workspace, every check's program can be found (in the workspace's
own `.venv/bin` first, then on PATH, as the check runner looks), and no source schedules a disabled mode.

Each problem names the key to change; `format_problem` adds the file and line.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autod.config import CronSource, Settings, WatchSource, key_lines

VENV_BIN = Path(".venv") / "bin"


@dataclass(frozen=True)
class Problem:
    key: tuple[str | int, ...]  # where in the YAML, e.g. ("checks", "tests", "run")
    message: str
    error: bool = True  # False: a warning (the config works, but not as it reads)


def resolve_program(program: str, workspace: Path, env: Mapping[str, str]) -> str | None:
    """The executable a check's first word names, as the check runner resolves it, or None.

    A name with a slash is a path (relative to the workspace); a bare name is looked up in the
    workspace's `.venv/bin` first, so `python -m pytest` means the project's Python, then on PATH.
    """
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else workspace / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    local = workspace / VENV_BIN / program
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(program, path=env.get("PATH", os.defpath))


def program_error(program: str, workspace: Path, env: Mapping[str, str]) -> str | None:
    """Why a check's program cannot start here, or None when it resolves (the one call to swap for
    the check runner's own resolver once there is one)."""
    if resolve_program(program, workspace, env) is not None:
        return None
    if "/" in program:
        return f"program {program!r} not found (or not executable) in the workspace"
    return f"program {program!r} not found in {workspace / VENV_BIN} or on PATH"


def check_problems(settings: Settings) -> list[Problem]:
    """Checks whose command cannot start: its program is not found, or the line cannot be split."""
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
        why = program_error(argv[0], settings.workspace, {**os.environ, **check.env})
        if why is not None:
            out.append(Problem(key, why))
    return out


def problems(settings: Settings) -> list[Problem]:
    """Every problem that would make part of this config do nothing (errors) or surprise (warnings)."""
    out = check_problems(settings)
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
    return out


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
