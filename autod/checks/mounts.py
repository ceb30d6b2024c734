"""The check sandbox's mount table: what of the host a check sees, in the order bubblewrap applies it.

Who decides what is mounted is the point. Every path here comes from the configuration (the
workspace, the configured program and the absolute paths the operator wrote in `run`,
`checks.expose`) or from autod's own interpreter. Nothing is read out of the workspace to add a
mount: a workspace venv whose python points into a hidden place does not get that place mounted
(the check runner refuses it with a message naming the fix instead).

The order is fixed and the last word is autod's:
  1. read-only root; private /tmp and /var/tmp;
  2. hidden: /root, /home, /run, /etc/autod, the daemon's home, and autod's own files;
  3. bound back read-only: the exposures (never a socket, never a home or a directory above one);
  4. the workspace, writable; its .git (or an empty placeholder) and its venvs read-only;
  5. autod-owned scratch directories the caller names, writable;
  6. hidden again, whatever the binds above uncovered: autod's own files, then last of all the
     runtime directory and the control socket.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from autod.confinement import HIDDEN_DIRS, PRIVATE_DIRS, expose_error, under

__all__ = [
    "HIDDEN_DIRS", "MountTable", "copy_mount_points", "expose_error", "git_placeholder", "real",
    "remove_mount_points", "under", "workspace_venvs",
]

VENV_NAMES = (".venv", "venv")


def real(p: Path | str) -> Path:
    return Path(os.path.realpath(p))


@dataclass(frozen=True)
class _Op:
    kind: str  # ro | rw | tmpfs | null
    dest: Path
    source: Path


class MountTable:
    """bwrap's mount operations, in order. A path is hidden only where it is still visible, and bound
    back only where something hid it, so the command line stays short."""

    def __init__(self) -> None:
        self.ops: list[_Op] = [_Op("ro", Path("/"), Path("/"))]

    def covering(self, path: Path) -> str:
        """The kind of the mount a check sees at `path`: the last op containing it. A later op wins
        whatever its depth: a bind of a directory above an earlier, deeper mount shows the host's tree
        there (bwrap binds recursively from the host), so the earlier mount is gone from sight."""
        for op in reversed(self.ops):
            if under(path, op.dest):
                return op.kind
        return "ro"

    def hidden(self, path: Path) -> bool:
        return self.covering(path) in ("tmpfs", "null")

    def hider(self, path: Path) -> Path | None:
        """The hidden place that covers `path` (an empty directory or /dev/null), None if it is seen."""
        for op in reversed(self.ops):
            if under(path, op.dest):
                return op.dest if op.kind in ("tmpfs", "null") else None
        return None

    def tmpfs(self, path: Path) -> None:
        self.ops.append(_Op("tmpfs", path, path))

    def hide(self, path: Path) -> None:
        """An empty read-only directory (or /dev/null) over `path`, if it exists and it, or anything
        bound below it since it was last hidden, is visible."""
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not self.hidden(path) or self._bound_below(path):
            self.ops.append(_Op("tmpfs" if stat.S_ISDIR(st.st_mode) else "null", path, path))

    def _bound_below(self, path: Path) -> bool:
        for op in reversed(self.ops):
            if op.kind in ("tmpfs", "null") and op.dest == path:
                return False  # hidden again after everything that came before
            if op.kind in ("ro", "rw") and under(op.dest, path):
                return True
        return False

    def bind(self, dest: Path, *, writable: bool, source: Path | None = None) -> None:
        """Bind `source` (default: `dest`) at `dest`; never a socket, which a bind cannot make read-only."""
        src = source or dest
        try:
            st = os.stat(src)
        except OSError:
            return
        if stat.S_ISSOCK(st.st_mode):
            return
        self.ops.append(_Op("rw" if writable else "ro", dest, src))

    def argv(self) -> list[str]:
        out: list[str] = []
        for op in self.ops[1:]:
            if op.kind == "tmpfs":
                out += ["--perms", "0755", "--tmpfs", str(op.dest)]
            elif op.kind == "null":
                out += ["--ro-bind", "/dev/null", str(op.dest)]
            else:
                out += ["--bind" if op.kind == "rw" else "--ro-bind", str(op.source), str(op.dest)]
        # The empty directories become read-only once everything bound below them is in place
        # (bwrap creates the mount points in them); the private tmp dirs stay the check's scratch space.
        # Only an empty directory still in sight: a later bind above one covered it (remounting what is
        # no mount point fails) and a later op at the same place is the one to remount.
        for i, op in enumerate(self.ops):
            if op.kind == "tmpfs" and str(op.dest) not in PRIVATE_DIRS and not any(
                under(op.dest, later.dest) for later in self.ops[i + 1 :]
            ):
                out += ["--remount-ro", str(op.dest)]
        return out


def exposable(path: Path, never: Sequence[Path]) -> bool:
    """Whether `path` may be bound back: not the root, a private dir, or a home or hidden root or any
    directory above one (that would hand the check a whole home again)."""
    if path == Path("/") or str(path) in PRIVATE_DIRS:
        return False
    return not any(under(n, path) for n in never)


def workspace_venvs(ws: Path) -> list[Path]:
    """The workspace's own virtualenvs (real directories, never symlinks): `.venv`, `venv`, and every
    top-level directory holding a pyvenv.cfg. Bound read-only, so a check cannot plant a *.pth that the
    operator's next unsandboxed `python` would run."""
    out: list[Path] = []
    try:
        entries = list(os.scandir(ws))
    except OSError:
        return out
    for e in entries:
        try:
            if not e.is_dir(follow_symlinks=False):
                continue
            if e.name in VENV_NAMES or os.path.isfile(os.path.join(e.path, "pyvenv.cfg")):
                out.append(Path(e.path))
        except OSError:
            continue
    return sorted(out)


# -- mount points in a copy of the workspace ---------------------------------------------------


def copy_mount_points(table: MountTable, shown_at: Path, copy: Path) -> list[Path]:
    """What bwrap will create in `copy` (a copy of the workspace the sandbox shows at `shown_at`) as
    mount points for the files it hides there and the copy lacks (autod's own files, never copied):
    each such file, and each of its parent directories the copy lacks, outermost first."""
    made: list[Path] = []
    for op in table.ops:
        if op.kind != "null" or op.dest == shown_at or not under(op.dest, shown_at):
            continue
        target = copy / op.dest.relative_to(shown_at)
        for p in (*reversed(target.parents), target):
            if under(p, copy) and p != copy and not os.path.lexists(p) and p not in made:
                made.append(p)
    return made


def remove_mount_points(made: Sequence[Path]) -> None:
    """Remove what `copy_mount_points` named and the run left empty: an empty file, then each empty
    directory (innermost first). Never anything a check filled."""
    for p in reversed(made):
        with contextlib.suppress(OSError):
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(p)  # fails, and stays, unless empty
            elif stat.S_ISREG(st.st_mode) and st.st_size == 0:
                os.unlink(p)


# -- the .git placeholder ----------------------------------------------------------------------

_placeholders: dict[Path, int] = {}
_placeholder_lock = threading.Lock()


@contextlib.contextmanager
def git_placeholder(ws: Path) -> Iterator[Path | None]:
    """For a workspace without `.git`: an empty directory at `.git` for the run (the sandbox mounts an
    empty read-only tmpfs on it, so no check can `git init` a repository whose config autod or a
    human would later obey); removed after the last run that made it. Yields it, or None when the
    workspace has its own `.git` (or one that is not ours to replace, e.g. a symlink)."""
    dot = ws / ".git"
    with _placeholder_lock:
        made = _placeholders.get(dot, 0) > 0
        if not made:
            try:
                os.mkdir(dot, 0o755)
                made = True
            except OSError:  # it exists (the workspace's own, or a symlink), or cannot be made
                made = False
        if made:
            _placeholders[dot] = _placeholders.get(dot, 0) + 1
    if not made:
        yield None
        return
    try:
        yield dot
    finally:
        with _placeholder_lock:
            _placeholders[dot] -= 1
            if _placeholders[dot] == 0:
                del _placeholders[dot]
                with contextlib.suppress(OSError):  # someone ran `git init` meanwhile: theirs now
                    os.rmdir(dot)
