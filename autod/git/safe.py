"""git as a tool, never as the repository's code: every git command autod runs goes through here.

A repository's config can make git execute programs: hooks (post-commit runs even under
`commit --no-verify`), `core.fsmonitor`, filter drivers (clean/smudge/process, run by add, status,
diff and hash-object --path), diff drivers (textconv, command), merge drivers, an external diff, a
pager, an editor, askpass, credential helpers, ssh, signing. autod runs git unsandboxed and with its
own rights, so a file planted in `.git` (or one it includes) would run as the daemon. Here each of
those is switched off on the command line, which outranks every config file; the system and global
configs are not read at all; and the repository's own config (with its includes) is read, never
executed, to neutralise the drivers it names. Nor does git read any file the repository's config
names: every key that names one (excludes, attributes, template, mailmap, order file, signature,
cookies) is pinned to /dev/null on the command line, and a patch's headers and signature are set by
format-patch flags (PATCH_FLAGS), never by `format.*`. Every call has a deadline.

Which repository is autod's own decision too (`repository`): git runs with an explicit `--git-dir`
and `--work-tree` (the workspace), never discovering one. The workspace's `.git` must be a
directory holding a repository, or the gitfile of a linked worktree or submodule whose gitdir
lies outside the workspace and points back at it; a symlink, a gitfile pointing elsewhere, an empty
placeholder, or a `core.worktree` naming another directory is refused (GitRefused), so a `.git` a
check planted can never send autod's git to read host files into a prompt.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import subprocess
from pathlib import Path

from autod.linebreaks import lines_of
from autod.safety.filemodes import workspace_umask
from autod.safety.saferead import read_untrusted, read_untrusted_head

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
    "log.showSignature=false",  # verifying a planted signature would run gpg.program
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "protocol.allow=never",  # no transport at all (a lazy fetch in a partial clone would run one)
    "gc.auto=0",  # no background gc or maintenance after a commit
    "maintenance.auto=false",
    "diff.ignoreSubmodules=all",  # a submodule's own config is not read here
    "submodule.recurse=false",
    # The ownership check exists to stop a repository's config from running code as another user;
    # nothing in it runs here, so a workspace owned by the operator works under the service user.
    "safe.directory=*",
    # Every key naming a file git would read is /dev/null, whatever the repository's config or a
    # file it includes says: a committed `.gitconfig` cannot put a credential into a signature, a
    # template, a mailmap or an order file. (The patch's own headers: PATCH_FLAGS.)
    "core.excludesFile=/dev/null",
    "core.attributesFile=/dev/null",
    "commit.template=/dev/null",
    "mailmap.file=/dev/null",
    "mailmap.blob=",
    "diff.orderFile=/dev/null",
    "format.signatureFile=/dev/null",
    "http.cookieFile=/dev/null",
)
# format-patch decides its headers, signature and prefixes itself: no `format.*` of the repository
# (headers, to/cc, from, subject prefix, notes, signature) shapes the patch autod writes.
PATCH_FLAGS = (
    "--no-signature", "--no-add-header", "--no-to", "--no-cc", "--no-from", "--no-notes", "--no-thread",
    "--no-numbered", "--no-cover-letter", "--no-base", "--subject-prefix=PATCH",
    "--src-prefix=a/", "--dst-prefix=b/", "--no-ext-diff", "--no-textconv", "--no-color",
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


class GitRefused(OSError):
    """autod will not run git here: the workspace's .git is not one autod trusts, or its config names
    a driver autod cannot neutralise on the command line."""


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def repository(workspace: Path) -> tuple[Path, Path]:
    """(git dir, work tree) of the workspace's own repository, or GitRefused naming why not."""
    ws = Path(os.path.realpath(workspace))
    dot = ws / ".git"
    try:
        st = os.lstat(dot)
    except OSError:
        raise GitRefused(f"{ws} has no .git: not a git repository") from None
    if stat.S_ISDIR(st.st_mode):
        gitdir = dot
    elif stat.S_ISREG(st.st_mode):
        gitdir = _gitfile_target(ws, dot)
    else:
        raise GitRefused(f"{dot} is a symlink or special file: autod does not follow it")
    if not (gitdir / "HEAD").is_file():
        raise GitRefused(f"{dot} holds no repository (no HEAD)")
    return gitdir, ws


def _gitfile_target(ws: Path, dot: Path) -> Path:
    """The gitdir a `.git` file names, if it is a linked worktree's or a submodule's that lies outside
    the workspace (a check cannot have made it) and belongs to this work tree."""
    try:
        first = lines_of(read_untrusted_head(dot, 4096).decode("utf-8", "replace"))[0]
    except (OSError, IndexError):
        raise GitRefused(f"{dot} cannot be read") from None
    if not first.startswith("gitdir:"):
        raise GitRefused(f"{dot} is not a gitfile")
    target = Path(first.split(":", 1)[1].strip())
    target = Path(os.path.realpath(target if target.is_absolute() else ws / target))
    if _under(target, ws):
        raise GitRefused(f"{dot} points inside the workspace")
    back = target / "gitdir"  # a linked worktree names its .git file here
    if back.is_file():
        try:
            named = read_untrusted(back, cap=4096).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            named = ""
        if named and Path(os.path.realpath(named)) == dot:
            return target
        raise GitRefused(f"{dot} points at a worktree of another directory")
    if "modules" in target.parts:  # a submodule: its config's core.worktree must lead back (checked later)
        return target
    raise GitRefused(f"{dot} points at {target}, which is not a worktree or submodule of this directory")


def _base(workspace: Path, gitdir: Path | None = None) -> list[str]:
    argv = ["git", "--no-pager", "-C", str(workspace)]
    if gitdir is not None:
        argv += [f"--git-dir={gitdir}", f"--work-tree={workspace}"]
    for item in SAFE_CONFIG:
        argv += ["-c", item]
    return argv


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


def argv_for(
    workspace: Path, args: tuple[str, ...], overrides: list[str], gitdir: Path | None = None
) -> list[str]:
    argv = _base(workspace, gitdir)
    for item in overrides:
        argv += ["-c", item]
    if args and args[0] in DIFF_COMMANDS:
        args = (args[0], "--no-ext-diff", "--no-textconv", *args[1:])
    return [*argv, *args]


def _repo_overrides(workspace: Path, gitdir: Path, env: dict[str, str]) -> list[str]:
    """Read (never execute) the repository's config, includes followed, for the drivers it defines;
    GitRefused when its core.worktree names another directory than the workspace."""
    r = subprocess.run(
        [*_base(workspace, gitdir), "config", "--list", "--includes", "-z"],
        capture_output=True,
        env=env,
        timeout=CONFIG_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if r.returncode != 0:
        return []
    _check_worktree(r.stdout, gitdir, workspace)
    return driver_overrides(r.stdout)


def _check_worktree(config_list: bytes, gitdir: Path, workspace: Path) -> None:
    for item in config_list.split(b"\0"):
        key, _, value = item.partition(b"\n")
        if key.decode("utf-8", "replace").lower() != "core.worktree":
            continue
        named = Path(os.fsdecode(value))
        named = Path(os.path.realpath(named if named.is_absolute() else gitdir / named))
        if named != Path(os.path.realpath(workspace)):
            raise GitRefused(f"the repository's core.worktree names {named}, not the workspace")


def run(
    workspace: Path,
    *args: str,
    input: bytes | None = None,
    timeout: float = TIMEOUT_S,
    index_file: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git ARGS` safely on the workspace's own repository (blocking). Raises OSError (GitRefused
    when the repository is not one autod trusts) or TimeoutExpired like subprocess.

    `index_file`: an index of autod's own (GIT_INDEX_FILE) instead of the repository's, so plumbing
    can build a commit without touching the operator's index (autod.delivery)."""
    env = git_env()
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    gitdir, worktree = repository(workspace)
    overrides = _repo_overrides(worktree, gitdir, env)
    return subprocess.run(
        argv_for(worktree, args, overrides, gitdir),
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
