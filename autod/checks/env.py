"""The environment a check gets: an allow-list of the daemon's variables, a private HOME and TMPDIR, the
workspace's venv first on PATH, autod's fixed settings, then the check's own `env:`. Data and one pure
function, below the config models (which refuse a check `env:` naming a denied variable) and the
sandbox (which passes the result to bwrap).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

# The environment a check gets, besides its own `env:`. Nothing else of the daemon's passes:
# AUTOD_* (the LLM key among them), CREDENTIALS_DIRECTORY, NOTIFY_SOCKET, WATCHDOG_*, proxies...
ENV_ALLOW = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "USER",
        "LOGNAME",
        "CI",
        "NO_COLOR",
        "FORCE_COLOR",
        "COLUMNS",
        "SOURCE_DATE_EPOCH",
        # Python knobs that change output or speed, never what code is loaded (so not PYTHONPATH,
        # PYTHONHOME, PYTHONSTARTUP, PYTHONUSERBASE, PYTHONINSPECT).
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONHASHSEED",
        "PYTHONFAULTHANDLER",
    }
)
ENV_ALLOW_PREFIXES = ("LC_",)
# Never in a check's environment, even from its own `env:` (config validation refuses them there).
ENV_DENY = frozenset(
    {
        "CREDENTIALS_DIRECTORY",
        "NOTIFY_SOCKET",
        "INVOCATION_ID",
        "JOURNAL_STREAM",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "RUNTIME_DIRECTORY",
        "STATE_DIRECTORY",
        "LOGS_DIRECTORY",
        "CACHE_DIRECTORY",
        "CONFIGURATION_DIRECTORY",
        "MAINPID",
    }
)
ENV_DENY_PREFIXES = ("AUTOD_", "WATCHDOG_")


def env_name_denied(name: str) -> bool:
    """Whether a variable may never reach a check (autod's own, systemd's service plumbing)."""
    return name in ENV_DENY or name.startswith(ENV_DENY_PREFIXES)


def check_env(
    base: Mapping[str, str],
    *,
    fixed: Mapping[str, str] = {},
    own: Mapping[str, str] = {},
    secrets: Iterable[str] = (),
    path_first: Path | None = None,
    virtual_env: Path | None = None,
    home: str,
    tmpdir: str,
) -> dict[str, str]:
    """The environment of one check run: the allow-list from `base`, a private HOME and TMPDIR,
    the workspace's venv first on PATH, autod's `fixed` settings, then the check's own `env:` (`own`).

    Denied names and any value that contains a configured secret are dropped wherever they come from.
    """
    env = {k: v for k, v in base.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIXES)}
    env.setdefault("PATH", os.defpath)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    if virtual_env is not None:
        env["VIRTUAL_ENV"] = str(virtual_env)
    env["HOME"] = home
    env["TMPDIR"] = tmpdir
    env.update(fixed)  # autod's own settings for this run; the check's `env:` may still override them
    env.update(own)
    keys = [s for s in secrets if s]
    return {
        k: v for k, v in env.items() if not env_name_denied(k) and not any(s in v for s in keys)
    }
