"""The one way autod keeps a SQLite file: the base of its stores (queue, state, delivery ledger,
webhook outbox, memory spool).

- Private: the file is made 0600 before sqlite opens it, so its -wal and -shm take the same mode.
- Write-ahead log; commits synced as the store needs (`FULL`: a commit survives a power cut;
  `NORMAL`: it survives a crash of autod, and a commit costs no fsync).
- Autocommit connection (`isolation_level=None`): a store takes `BEGIN IMMEDIATE` itself when several
  statements must land together (`_write`), so two processes never deadlock upgrading a read lock.
- The schema is brought to its version at open, in one such transaction (`Schema`).
- Every str bound to a statement is made encodable first (`_Encodable`: a lone surrogate, from a file
  name that is not UTF-8, becomes a backslash escape): SQLite refused such a row, and a cycle whose
  record held one stayed `running`.
- One connection shared by every thread behind one re-entrant lock (so `check_same_thread` is off
  safely); a store the event loop calls runs its statements on one named worker thread (`call`),
  never on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from autod import fsnames
from autod.linebreaks import lines_of
from autod.safety.filemodes import private_file
from autod.threads import named_pool

__all__ = ["Schema", "SqliteStore", "split_sql", "statements"]

T = TypeVar("T")
Step = Callable[[sqlite3.Connection], None]


def _newer(path: Path, version: int, supported: int) -> Exception:
    return RuntimeError(f"{path}: schema version {version} is newer than this autod ({supported})")


@dataclass(frozen=True)
class Schema:
    """What a store's file holds: `create` (idempotent, `IF NOT EXISTS`) makes version 1 and runs at
    every open; `steps[N]` takes a file from version N-1 to N, once. `version` 0: an unversioned
    file (only the create script). `newer(path, found, supported)`: the error for a file a newer
    autod wrote."""

    create: str
    version: int = 0
    steps: Mapping[int, Step] = field(default_factory=dict)
    newer: Callable[[Path, int, int], Exception] = _newer

    def apply(self, db: sqlite3.Connection, path: Path) -> None:
        """Bring `db` (inside the caller's write transaction) to this version, keeping every row."""
        found = db.execute("PRAGMA user_version").fetchone()[0]
        if found > self.version:
            raise self.newer(path, found, self.version)
        for statement in split_sql(self.create):
            db.execute(statement)
        for step in range(max(found, 1) + 1, self.version + 1):
            self.steps[step](db)
        if found != self.version:
            db.execute(f"PRAGMA user_version = {self.version}")


def statements(*sql: str) -> Step:
    """A migration step that runs these statements in order."""

    def step(db: sqlite3.Connection) -> None:
        for s in sql:
            db.execute(s)

    return step


def split_sql(script: str) -> list[str]:
    """The statements of a script, split where each is complete (a trigger holds inner `;`): the
    statements run one by one inside a transaction, which `executescript` would commit first."""
    out, current = [], ""
    for line in lines_of(script, keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current.strip())
            current = ""
    return [s for s in out if s]


def _bound(params: Any) -> Any:
    """A statement's parameters with each str made encodable; the same object when every one is."""
    if not isinstance(params, dict | list | tuple):
        return params
    values = params.values() if isinstance(params, dict) else params
    if all(not isinstance(v, str) or fsnames.is_utf8(v) for v in values):
        return params
    if isinstance(params, dict):
        return {k: fsnames.encodable(v) for k, v in params.items()}
    return [fsnames.encodable(v) for v in params]


class _Encodable(sqlite3.Connection):
    """A connection whose statements bind only encodable text (`autod.fsnames`)."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return super().execute(sql, _bound(parameters))

    def executemany(self, sql: str, seq: Any, /) -> sqlite3.Cursor:
        return super().executemany(sql, (_bound(p) for p in seq))


class SqliteStore:
    """One SQLite file, one connection, one lock; subclasses add the store's own statements.

    `synchronous`: FULL or NORMAL (above). `busy_timeout_s`: how long a statement waits for another
    process's lock. `rows`: rows as `sqlite3.Row` (by column name). `worker`: the name of the thread
    `call` runs on. `reset_mode`: an existing file is made 0600 again too (one an older autod made
    with the umask). `read_only`: open an existing file for a look (no pragmas, no schema, no create).
    `name`: what a use after `close` calls the store.
    """

    def __init__(
        self,
        path: Path,
        schema: Schema,
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout_s: float = 30.0,
        rows: bool = False,
        worker: str = "autod-store",
        reset_mode: bool = False,
        read_only: bool = False,
        name: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        self._lock = threading.RLock()
        self._worker = worker
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        if read_only:
            db = sqlite3.connect(
                f"file:{self.path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None,
                factory=_Encodable,
            )
        else:
            private_file(self.path)
            if reset_mode:
                os.chmod(self.path, 0o600)
            db = sqlite3.connect(
                self.path, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None,
                factory=_Encodable,
            )
        self._db = db
        if rows:
            db.row_factory = sqlite3.Row
        try:
            if not read_only:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(f"PRAGMA synchronous={synchronous}")
                with self._write() as tx:
                    schema.apply(tx, self.path)
        except BaseException:
            db.close()
            raise

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction taken up front (IMMEDIATE), committed when the block ends, else rolled back."""
        with self._read() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """The connection, held for the block (statements autocommit one by one)."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            yield self._db

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking method of this store on its own worker thread, off the event loop."""
        if self._pool is None:
            self._pool = named_pool(self._worker, 1)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        """Wait for the worker's last statement, then close the file (idempotent)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()

    async def aclose(self) -> None:
        """Close without blocking the loop on the worker's last transaction."""
        await asyncio.to_thread(self.close)
