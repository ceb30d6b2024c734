"""git plumbing for delivery, every call through autod.git.safe (no hook, filter, fsmonitor or driver
runs; each call has a deadline). A commit is built in an index file of autod's own (GIT_INDEX_FILE in
the state dir), never the repository's, so the operator's working tree and index are not touched:
read-tree PARENT, hash-object -w each file, update-index, write-tree, commit-tree, update-ref (with the
value autod expects the branch to have, so a branch someone else moved is never overwritten)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from autod import fsnames
from autod.git import safe as gitsafe
from autod.linebreaks import byte_lines, lines_of

ZERO = "0" * 40
PUSH_PROTOCOLS = ("file", "ssh", "https")  # transports a push may use (gitsafe allows none by default)
_OID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


class GitError(Exception):
    """A git command failed; the message names the step, never a URL or a secret."""


@dataclass(frozen=True)
class Blob:
    mode: str  # "100644" | "100755"
    data: bytes


def git(
    ws: Path,
    *args: str,
    input: bytes | None = None,
    index: Path | None = None,
    timeout: float = gitsafe.TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    return gitsafe.run(ws, *args, input=input, timeout=timeout, index_file=index)


def _out(r: subprocess.CompletedProcess[bytes]) -> str:
    return r.stdout.decode("utf-8", "replace").strip()


def _need(r: subprocess.CompletedProcess[bytes], step: str) -> str:
    if r.returncode != 0:
        tail = lines_of(r.stderr.decode("utf-8", "replace").strip())[-1:] or [f"exit {r.returncode}"]
        raise GitError(f"git {step} failed: {tail[0][:200]}")
    return _out(r)


def is_repo(ws: Path) -> bool:
    try:
        return git(ws, "rev-parse", "--is-inside-work-tree").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def rev(ws: Path, name: str) -> str | None:
    """The commit `name` points at, or None."""
    r = git(ws, "rev-parse", "-q", "--verify", f"{name}^{{commit}}")
    oid = _out(r)
    return oid if r.returncode == 0 and _OID.match(oid) else None


def head_file(ws: Path, commit: str, rel: str) -> Blob | None:
    """`rel` as committed in `commit` (bytes as stored, no filter), or None when it is not there."""
    r = git(ws, "ls-tree", "-z", commit, "--", rel)
    entry = r.stdout.split(b"\0", 1)[0].decode("utf-8", "replace")
    if r.returncode != 0 or not entry:
        return None
    meta, _, path = entry.partition("\t")
    mode, kind, oid = meta.split(" ")
    if kind != "blob" or path != rel or mode not in ("100644", "100755"):
        return None  # a symlink, a submodule, a directory: not a file autod edits
    data = git(ws, "cat-file", "blob", oid)
    if data.returncode != 0:
        raise GitError(f"git cat-file failed for {rel}")
    return Blob(mode, data.stdout)


def merge_file(ws: Path, tmp_dir: Path, ours: bytes, base: bytes, theirs: bytes) -> bytes | None:
    """The change base->theirs applied onto `ours` (git merge-file); None when they conflict."""
    tmp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    stem = tmp_dir / f"merge-{secrets.token_hex(6)}"
    paths = [Path(f"{stem}.{n}") for n in ("ours", "base", "theirs")]
    try:
        for p, data in zip(paths, (ours, base, theirs), strict=True):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        r = git(ws, "merge-file", "-p", "-q", *map(str, paths))
    finally:
        for p in paths:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
    if r.returncode != 0:  # > 0: conflicts; < 0 (255): an error
        return None
    return r.stdout


def build_commit(
    ws: Path, index: Path, parent: str, files: dict[str, Blob | None], message: str, ident: list[str]
) -> str:
    """A commit of `parent` with `files` replaced (None: removed), built in `index` (a file of autod's)."""
    index.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        index.unlink()
    try:
        _need(git(ws, "-c", "core.splitIndex=false", "read-tree", parent, index=index), "read-tree")
        lines = []
        for rel, blob in sorted(files.items()):
            if blob is None:  # mode 0 removes the entry
                lines.append(f"0 {ZERO}\t{rel}".encode() + b"\0")
                continue
            oid = _need(
                git(ws, "hash-object", "-w", "--no-filters", "--stdin", input=blob.data), "hash-object"
            )
            lines.append(f"{blob.mode} {oid}\t{rel}".encode() + b"\0")
        _need(
            git(
                ws,
                "-c",
                "core.splitIndex=false",
                "update-index",
                "-z",
                "--index-info",
                input=b"".join(lines),
                index=index,
            ),
            "update-index",
        )
        tree = _need(git(ws, "write-tree", index=index), "write-tree")
        return _need(
            git(ws, *ident, "commit-tree", tree, "-p", parent, "-F", "-",
                input=fsnames.shown(message).encode()),  # it may quote a name that is not UTF-8
            "commit-tree",
        )
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()


def tree_of(ws: Path, commit: str) -> str:
    return _need(git(ws, "rev-parse", f"{commit}^{{tree}}"), "rev-parse")


def parent_of(ws: Path, commit: str) -> str | None:
    return rev(ws, f"{commit}^")


def update_ref(ws: Path, ref: str, new: str, expected: str | None, reason: str) -> bool:
    """Move `ref` to `new` only if it is at `expected` (None: it must not exist). False when it was not."""
    r = git(ws, "update-ref", "-m", reason[:200], ref, new, expected or ZERO)
    return r.returncode == 0


def checked_out(ws: Path, ref: str) -> bool:
    """Whether a worktree of the repository has `ref` checked out (moving it would change that checkout)."""
    r = git(ws, "worktree", "list", "--porcelain")
    return r.returncode != 0 or f"branch {ref}".encode() in byte_lines(r.stdout)


def delete_ref(ws: Path, ref: str, expected: str) -> bool:
    return git(ws, "update-ref", "-d", ref, expected).returncode == 0


def is_ancestor(ws: Path, a: str, b: str) -> bool:
    return git(ws, "merge-base", "--is-ancestor", a, b).returncode == 0


def valid_branch(ws: Path, name: str) -> bool:
    return git(ws, "check-ref-format", "--branch", name).returncode == 0


def identity(ws: Path) -> list[str]:
    """`-c` options naming autod when the repository has no identity of its own (global config is unread)."""
    if _out(git(ws, "config", "user.email")):
        return []
    return ["-c", "user.name=autod", "-c", "user.email=autod@localhost"]


def format_patch(ws: Path, commit: str) -> bytes:
    """`git format-patch -1 --stdout COMMIT`: the mbox a `git am` applies, shaped by autod alone."""
    r = git(ws, "format-patch", "-1", "--stdout", *gitsafe.PATCH_FLAGS, commit)
    _need(r, "format-patch")
    return r.stdout


def has_remote(ws: Path, remote: str) -> bool:
    r = git(ws, "config", "--get", f"remote.{remote}.url")
    return r.returncode == 0 and bool(r.stdout.strip())


@dataclass(frozen=True)
class PushResult:
    ok: bool
    reason: str = ""  # why it was refused, from git's porcelain status (no URL)


def push(ws: Path, remote: str, commit: str, branch: str, expected: str | None, timeout: float) -> PushResult:
    """Push `commit` to `remote`'s `branch` only if the remote branch is at `expected` (None: absent).

    Never a plain force: `--force-with-lease` with autod's own last push, so a branch someone changed
    on the remote is refused, not overwritten. The remote's `receivepack` setting is not used (it would
    run a program named in the repository's config); the transports are file, ssh (batch mode) and https.
    """
    allow = [x for p in PUSH_PROTOCOLS for x in ("-c", f"protocol.{p}.allow=always")]
    ssh = ["-c", "core.sshCommand=ssh -o BatchMode=yes"]
    ref = f"refs/heads/{branch}"
    try:
        r = git(
            ws,
            *allow,
            *ssh,
            "push",
            "--porcelain",
            "--no-verify",
            "--receive-pack=git-receive-pack",
            f"--force-with-lease={ref}:{expected or ''}",
            remote,
            f"{commit}:{ref}",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return PushResult(False, f"no answer from the remote within {timeout:g}s")
    if r.returncode == 0:
        return PushResult(True)
    return PushResult(False, _push_reason(r))


def _push_reason(r: subprocess.CompletedProcess[bytes]) -> str:
    for line in lines_of(r.stdout.decode("utf-8", "replace")):
        if line.startswith("!"):  # "!\t<src>:<dst>\t[rejected] (stale info)"
            return line.split("\t")[-1].strip()[:200]
    err = [ln for ln in lines_of(r.stderr.decode("utf-8", "replace")) if ln.strip()]
    for ln in err:
        if ln.startswith(("fatal:", "error:")):
            return re.sub(r"'[^']*'", "'...'", ln)[:200]  # git quotes the URL in some messages
    return f"git push exit {r.returncode}"
