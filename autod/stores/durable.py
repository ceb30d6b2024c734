"""How autod opens a SQLite file it must not lose: private (0600 before sqlite creates it, so its
-wal and -shm are too), write-ahead log, every commit synced, one connection shared by the worker
thread its owner serialises with a lock."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from autod.safety.filemodes import private_file

__all__ = ["open_durable"]


def open_durable(path: Path) -> sqlite3.Connection:
    private_file(path)
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db
