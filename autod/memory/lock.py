"""One owner process per embedded memory store: an exclusive, non-blocking flock.

chromadb's embedded client is not meant for concurrent writers from several processes, so the
daemon (or a CLI command while no daemon runs) holds ``<state_dir>/memory/.owner.lock`` for as
long as it has the store open. The kernel drops the lock when the process dies, even on kill -9,
so a crash never leaves a stale lock behind; the pid written inside is for the error message only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_NAME = ".owner.lock"


class MemoryLocked(RuntimeError):
    """Another process owns the embedded memory store."""

    def __init__(self, path: Path, pid: int | None) -> None:
        who = f"process {pid}" if pid else "another process"
        super().__init__(
            f"memory store {path.parent} is in use by {who} (lock {path}); "
            "stop that process, or use the daemon's control commands while it runs"
        )
        self.path = path
        self.pid = pid


class OwnerLock:
    """Exclusive ownership of a memory directory, held until :meth:`release`."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock now or raise MemoryLocked naming the owner's pid."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise MemoryLocked(self.path, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock


def _read_pid(fd: int) -> int | None:
    try:
        raw = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None
