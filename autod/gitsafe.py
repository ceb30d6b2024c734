"""git as a tool, never as the repository's code: every git command autod runs goes through here.

A repository's config can make git execute programs: hooks (post-commit runs even under
`commit --no-verify`), `core.fsmonitor`, filter drivers (clean/smudge/process, run by add, status,
diff and hash-object --path), diff drivers (textconv, command), merge drivers, an external diff, a
pager, an editor, askpass, credential helpers, ssh, signing. autod runs git unsandboxed and with its
own rights, so a file planted in `.git` (or one it includes) would run as the daemon. Here each of
those is switched off on the command line, which outranks every config file; the system and global
configs are not read at all; and the repository's own config (with its includes) is read, never
executed, to neutralise the drivers it names. Every call has a deadline.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path

from autod.filemodes import workspace_umask

TIMEOUT_S = 60.0
CONFIG_TIMEOUT_S = 10.0

# Outranks .git/config and every file it includes.
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",  # <dir>/post-commit cannot exist under a non-directory: no hook runs
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=false",
    "sequence.editor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "credential.helper=",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "protocol.allow=never",  # no transport at all (a lazy fetch in a partial clone would run one)
    "gc.auto=0",  # no background gc or maintenance after a commit
    "maintenance.auto=false",
    "diff.ignoreSubmodules=all",  # a submodule's own config is not read here
    "submodule.recurse=false",
    # The ownership check exists to stop a repository's config from running code as another user;
    # nothing in it runs here, so a workspace owned by the operator works under the service user.
    "safe.directory=*",
)
# Environment variables git reads that could point it elsewhere or run something are not passed.
PASS_ENV = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "TMPDIR"})
SAFE_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "false",
}
# Subcommands that can show a diff: external diff and textconv are refused on their command line too.
DIFF_COMMANDS = frozenset({"diff", "log", "show"})

_DRIVER_KEY = re.compile(
    r"^(?:filter\.(?P<f>.+)\.(?:clean|smudge|process|required)"
    r"|diff\.(?P<d>.+)\.(?:textconv|command)"
    r"|merge\.(?P<m>.+)\.driver)$",
    re.IGNORECASE,
)


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in PASS_ENV or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    return {**env, **SAFE_ENV}


def _base(workspace: Path) -> list[str]:
    argv = ["git", "--no-pager", "-C", str(workspace)]
    for item in SAFE_CONFIG:
        argv += ["-c", item]
    return argv


class GitRefused(OSError):
    """The repository's config names a driver autod cannot neutralise on the command line."""


def driver_overrides(config_list: bytes) -> list[str]:
    """`-c` values that empty every filter, diff and merge driver named in `git config --list -z`."""
    out: list[str] = []
    for item in config_list.split(b"\0"):
        key = item.split(b"\n", 1)[0].decode("utf-8", "replace")
        m = _DRIVER_KEY.match(key)
        if not m:
            continue
        name = m["f"] or m["d"] or m["m"]
        if "=" in name:  # `-c filter.a=b.clean=` would set another key and leave the driver armed
            raise GitRefused(f"git driver name {name!r} contains '=': refusing to run git here")
        if m["f"] is not None:
            new = [f"filter.{name}.clean=", f"filter.{name}.smudge=", f"filter.{name}.process="]
            new.append(f"filter.{name}.required=false")
        elif m["d"] is not None:
            new = [f"diff.{name}.textconv=", f"diff.{name}.command="]
        else:
            new = [f"merge.{name}.driver="]
        out += [x for x in new if x not in out]
    return out


def argv_for(workspace: Path, args: tuple[str, ...], overrides: list[str]) -> list[str]:
    argv = _base(workspace)
    for item in overrides:
        argv += ["-c", item]
    if args and args[0] in DIFF_COMMANDS:
        args = (args[0], "--no-ext-diff", "--no-textconv", *args[1:])
    return [*argv, *args]


def _repo_overrides(workspace: Path, env: dict[str, str]) -> list[str]:
    """Read (never execute) the repository's config, includes followed, for the drivers it defines."""
    r = subprocess.run(
        [*_base(workspace), "config", "--list", "--includes", "-z"],
        capture_output=True,
        env=env,
        timeout=CONFIG_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return driver_overrides(r.stdout) if r.returncode == 0 else []


def run(
    workspace: Path,
    *args: str,
    input: bytes | None = None,
    timeout: float = TIMEOUT_S,
    index_file: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git -C workspace ARGS` safely (blocking). Raises OSError or TimeoutExpired like subprocess.

    `index_file`: an index of autod's own (GIT_INDEX_FILE) instead of the repository's, so plumbing
    can build a commit without touching the operator's index (autod.delivery)."""
    env = git_env()
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    overrides = _repo_overrides(workspace, env)
    return subprocess.run(
        argv_for(workspace, args, overrides),
        capture_output=True,
        input=input,
        env=env,
        timeout=timeout,
        check=False,
        stdin=None if input is not None else subprocess.DEVNULL,
        umask=workspace_umask(),  # git's objects get the repository's usual modes, not autod's 077
    )


async def arun(
    workspace: Path, *args: str, input: bytes | None = None, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    """`run` off the event loop."""
    return await asyncio.to_thread(run, workspace, *args, input=input, timeout=timeout)
