"""What a check is given of the daemon's world, and what never: data and pure functions, below the
config models (which refuse a check `env:` naming a denied variable, and a `checks.expose` entry that
would open a home) and the check sandbox (autod.checks.sandbox, which applies them with bwrap).

The environment a check gets: an allow-list of the daemon's variables, a private HOME and TMPDIR, the
workspace's venv first on PATH, autod's fixed settings, then the check's own `env:`. The host it sees:
everything read-only, except the directories hidden from every check (`HIDDEN_DIRS`) and its private
scratch (`PRIVATE_DIRS`); an exposure binds back only what `expose_error` allows (autod.checks.mounts
builds the mount table).
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


def steady_hashes(base: Mapping[str, str]) -> dict[str, str]:
    """`PYTHONHASHSEED=0` for a check whose environment does not set it (the check's `env:` still may).

    A check's runs are judged against each other test by test (autod.checks.outcome), so a test must
    have the same id in every run. With hash randomization a set's order changes from run to run, and
    pytest names a parameter it cannot print by its index (`test_format[4-19-expected20-%C]` in one
    run is `...expected13...` in the next): every candidate would seem to drop tests it never touched,
    and no fix could pass."""
    return {} if "PYTHONHASHSEED" in base else {"PYTHONHASHSEED": "0"}


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


# Secrets a read-only root would still show. A workspace (or an exposure) below one of these is bound
# back in; everything else there is an empty, read-only directory.
HIDDEN_DIRS = ("/root", "/home", "/run", "/etc/autod")
PRIVATE_DIRS = ("/tmp", "/var/tmp")  # a fresh tmpfs each: the check's scratch space


def under(path: Path, root: Path) -> bool:
    """`path` is `root` or below it (both absolute and normalised); string work: this runs per mount."""
    p, r = str(path), str(root)
    return p == r or r == "/" or p.startswith(r + "/")


def expose_error(p: Path) -> str | None:
    """Why `p` may not be a `checks.expose` entry, or None: it must be absolute, not a home, /run, /tmp
    or a directory above one (that would hand a check whole homes again), and nothing under /run
    (sockets) or /etc/autod (autod's config)."""
    if not p.is_absolute():
        return "must be an absolute path"
    norm = Path(os.path.normpath(p))
    home = os.environ.get("HOME")
    roots = [Path("/"), *map(Path, (*PRIVATE_DIRS, *HIDDEN_DIRS))]
    roots += [Path(home)] if home and os.path.isabs(home) and home != "/" else []
    if norm == Path("/") or any(under(r, norm) for r in roots[1:]):
        return (
            f"{norm} is a home, /run, /tmp or a directory above one: name the directory the checks"
            " need inside it (e.g. /root/.pyenv/versions/3.12.1)"
        )
    for private in (Path("/run"), Path("/etc/autod")):
        if private in norm.parents:
            return f"{norm} is inside {private}, which checks never see"
    return None
