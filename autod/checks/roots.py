"""autod's roots: the directories a check never sees any part of, so instances on one host stay apart.

Every `autod@` instance runs as the same user, with its state, logs, cache and runtime dir one level
below a directory of autod's own (`/var/lib/autod/<instance>`, `/var/log/autod/<instance>`...). Hiding
only the instance's own state dir and log file left a neighbour's `state.db`, queue, transcripts,
memory and logs, and its own rotated logs, readable to a check. The rule instead: the sandbox hides,
wholesale,

- the system roots (`/var/lib/autod`, `/var/log/autod`, `/var/cache/autod`, `/run/autod`);
- the nearest directory named `autod` above the state dir, the log file and systemd's state, logs,
  cache and runtime directories (a per-instance layout anywhere, a user unit's `~/.local/state/autod`);
  without one, when such a directory is itself named `autod...` (`/var/lib/autod-a`), every `autod*`
  directory beside it (`/var/lib/autod-b` too);
- the state dir itself, and the log file's directory when it is named for autod; else the log file
  and every rotation of it beside it (`autod.jsonl.1`, `autod.jsonl.2.gz`).

A root above the workspace is hidden with the workspace bound back inside it (the mount table's order):
the check sees its workspace and nothing else there. A directory named `autod` inside the workspace is
the project's (a package), not a root; the state dir `.autod` of a workspace is hidden as itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from autod.checks.mounts import real, under

SYSTEM_ROOTS = ("/var/lib/autod", "/var/log/autod", "/var/cache/autod", "/run/autod")
SYSTEMD_DIRS = ("STATE_DIRECTORY", "LOGS_DIRECTORY", "CACHE_DIRECTORY", "RUNTIME_DIRECTORY")
ROOT_NAME = "autod"


def autod_roots(workspace: Path, state_dir: Path, log_file: Path) -> tuple[Path, ...]:
    """Every directory of autod's that a check in `workspace` must not see (the rule above)."""
    ws = real(workspace)
    found: list[Path] = [Path(p) for p in SYSTEM_ROOTS]
    places = [real(state_dir), real(log_file).parent]
    places += [real(d) for v in SYSTEMD_DIRS for d in os.environ.get(v, "").split(":") if d]
    for place in places:
        root = next((p for p in (place, *place.parents) if p.name == ROOT_NAME), None)
        if root is not None:
            found.append(root)
        elif place.name.startswith(ROOT_NAME):  # side by side (`/var/log/autod-a`): every `autod*` there
            found += [place.parent / n for n in _names(place.parent) if n.startswith(ROOT_NAME)]
    found.append(real(state_dir))
    log = real(log_file)
    if ROOT_NAME in log.parent.name:
        found.append(log.parent)
    else:
        found += [log, *_rotations(log)]
    out: list[Path] = []
    for p in found:
        if p not in out and p != ws and not (under(p, ws) and p.name == ROOT_NAME):
            out.append(p)
    return tuple(out)


def _rotations(log: Path) -> list[Path]:
    """The rotated copies of `log` beside it now (logrotate's `.1`, `.2.gz`, dated suffixes)."""
    return [log.parent / n for n in _names(log.parent) if n.startswith((log.name + ".", log.name + "-"))]


def _names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []
