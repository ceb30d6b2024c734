"""Where the running daemon is when the config on disk no longer validates.

A refused reload leaves the daemon on the config it loaded last; `autod status`, `pause` and `resume`
still need its state dir (and the control socket in it). Only `workspace` and `state_dir` are read,
from the YAML if it parses, else from the top-level lines that set them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from autod.config.bounded import CONFIG_CAP, read_bounded
from autod.config.settings import Settings, find_config

_TOP_LEVEL = re.compile(r"^(workspace|state_dir)\s*:\s*(?P<value>[^#\n]*?)\s*(#.*)?$", re.MULTILINE)


def _top_level(path: Path) -> dict[str, str]:
    try:
        text = read_bounded(path, CONFIG_CAP).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    try:
        data: Any = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):  # too deep, a number too long, ...
        data = None
    if isinstance(data, dict):
        return {k: str(data[k]) for k in ("workspace", "state_dir") if isinstance(data.get(k), str | Path)}
    found: dict[str, str] = {}
    for m in _TOP_LEVEL.finditer(text):
        found.setdefault(m[1], m["value"].strip("'\""))
    return found


def state_only(explicit: str | os.PathLike[str] | None) -> Settings | None:
    """Settings good for finding the state dir and control socket only, or None when not even the
    workspace can be read. Never for running anything: every other value is a default."""
    path = find_config(explicit)
    keys = _top_level(path) if path is not None else {"workspace": "."}
    workspace = os.environ.get("AUTOD_WORKSPACE") or keys.get("workspace")
    if not workspace or "\0" in workspace or "\0" in keys.get("state_dir", ""):
        return None
    ws = Path(workspace).expanduser().resolve()
    state = os.environ.get("AUTOD_STATE_DIR") or keys.get("state_dir")
    state_dir = None
    if state:
        sd = Path(state).expanduser()
        state_dir = sd.resolve() if sd.is_absolute() else (ws / sd).resolve()
    return Settings.model_construct(workspace=ws, state_dir=state_dir)
