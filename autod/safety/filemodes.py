"""File modes: autod's own files are private; what it writes into the workspace keeps the workspace's modes.

Every `autod` command runs under umask 077 (`private_files`), so whatever it creates for itself (the
state dir, state.db and queue.db with their -wal/-shm, logs, the journal, reports, the memory store
chromadb writes, the pid file) is 0700/0600 whichever command came first: `autod pause` before the
first start used to leave a 0755 state dir and 0644 databases. The umask autod was started with is
remembered: files it creates in the workspace (a plan's new file) and the commands it runs (checks,
git) use it, so the repository looks as if a person had made the change. Existing directories are
never chmod-ed (an operator may have made the state dir 0750 for a group on purpose).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["private_dir", "private_file", "private_files", "workspace_umask"]

PRIVATE_UMASK = 0o077
_started_with: int | None = None


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Run a command under umask 077; the umask it was started with is restored afterwards."""
    global _started_with
    old = os.umask(PRIVATE_UMASK)
    outer = _started_with
    if _started_with is None:
        _started_with = old
    try:
        yield
    finally:
        os.umask(old)
        _started_with = outer


def workspace_umask() -> int:
    """The umask autod was started with (for workspace files and the commands it runs)."""
    if _started_with is not None:
        return _started_with
    return _current_umask()


def _current_umask() -> int:
    """The process umask, read without changing it where the OS allows (no race with other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022  # no portable read-only way; the common default


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) 0700; an existing directory is left as it is."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty with mode 0600 if it does not exist (before sqlite opens it: its -wal and
    -shm files take the database file's mode)."""
    private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    return path
