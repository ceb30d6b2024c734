"""The store base (autod.stores.sqlite): every SQLite store autod keeps is private, write-ahead logged,
synced as it promises, migrated in one transaction, and says so when used after close."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from autod.delivery.ledger import DeliveryLedger
from autod.memory.spool import Spool
from autod.stores.queue import EventQueue
from autod.stores.sqlite import Schema, SqliteStore, statements
from autod.stores.state import State
from autod.webhooks.outbox import Outbox

FULL, NORMAL = 2, 1


@pytest.mark.parametrize(
    ("make", "synchronous"),
    [
        (lambda p: EventQueue(p), FULL),
        (lambda p: State(p), FULL),
        (lambda p: DeliveryLedger(p), FULL),
        (lambda p: Outbox(p, 10), FULL),
        (lambda p: Spool(p), NORMAL),
    ],
    ids=["queue", "state", "delivery", "outbox", "spool"],
)
def test_every_store_is_private_write_ahead_logged_and_synced_as_it_promises(tmp_path, make, synchronous):
    path = tmp_path / "state" / "x.db"
    store = make(path)
    try:
        with store._read() as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("PRAGMA synchronous").fetchone()[0] == synchronous
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        for side in ("-wal", "-shm"):
            assert stat.S_IMODE(Path(f"{path}{side}").stat().st_mode) == 0o600
    finally:
        store.close()


def test_only_the_spool_makes_an_existing_wider_file_private_again(tmp_path):
    for cls in (Spool, DeliveryLedger):
        path = tmp_path / f"{cls.__name__}.db"
        path.touch(mode=0o644)
        path.chmod(0o644)
        cls(path).close()
        assert stat.S_IMODE(path.stat().st_mode) == (0o600 if cls is Spool else 0o644)


def _store(path: Path, schema: Schema) -> SqliteStore:
    return SqliteStore(path, schema, name="test store")


def test_steps_run_once_from_the_files_version_and_the_version_is_recorded(tmp_path):
    path = tmp_path / "s.db"
    ran: list[int] = []
    v1 = Schema("CREATE TABLE IF NOT EXISTS t (a INTEGER);", 1)
    _store(path, v1).close()

    def step(n: int):
        def run(db: sqlite3.Connection) -> None:
            ran.append(n)
            db.execute(f"ALTER TABLE t ADD COLUMN c{n} TEXT")

        return run

    v3 = Schema(v1.create, 3, {2: step(2), 3: step(3)})
    store = _store(path, v3)
    store.close()
    _store(path, v3).close()  # at its version: nothing runs again
    assert ran == [2, 3]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        assert [r[1] for r in db.execute("PRAGMA table_info(t)")] == ["a", "c2", "c3"]


def test_a_failing_step_leaves_the_file_at_its_old_version_with_its_rows(tmp_path):
    path = tmp_path / "s.db"
    v1 = Schema("CREATE TABLE IF NOT EXISTS t (a INTEGER);", 1)
    store = _store(path, v1)
    with store._write() as db:
        db.execute("INSERT INTO t VALUES (7)")
    store.close()

    def broken(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE t ADD COLUMN b TEXT")
        raise RuntimeError("step failed")

    with pytest.raises(RuntimeError, match="step failed"):
        _store(path, Schema(v1.create, 2, {2: broken}))
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        assert [r[1] for r in db.execute("PRAGMA table_info(t)")] == ["a"]
        assert db.execute("SELECT a FROM t").fetchall() == [(7,)]


def test_a_file_from_a_newer_autod_is_refused_with_the_stores_own_error(tmp_path):
    path = tmp_path / "s.db"
    create = "CREATE TABLE IF NOT EXISTS t (a);"
    _store(path, Schema(create, 5, dict.fromkeys(range(2, 6), lambda db: None))).close()

    class Newer(Exception):
        pass

    schema = Schema(create, 4, newer=lambda p, found, ours: Newer(p, found, ours))
    with pytest.raises(Newer) as caught:
        _store(path, schema)
    assert caught.value.args == (path, 5, 4)


def test_an_unversioned_schema_creates_its_tables_and_keeps_version_zero(tmp_path):
    path = tmp_path / "s.db"
    schema = Schema("CREATE TABLE IF NOT EXISTS t (a);\nCREATE TABLE IF NOT EXISTS u (b);")
    _store(path, schema).close()
    _store(path, schema).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 0
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names == {"t", "u"}


def test_a_write_that_raises_is_rolled_back(tmp_path):
    store = _store(tmp_path / "s.db", Schema("CREATE TABLE IF NOT EXISTS t (a);"))
    with pytest.raises(ValueError), store._write() as db:
        db.execute("INSERT INTO t VALUES (1)")
        raise ValueError
    with store._read() as db:
        assert db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    store.close()


def test_close_is_idempotent_and_a_use_after_it_names_the_store(tmp_path):
    store = _store(tmp_path / "s.db", Schema("CREATE TABLE IF NOT EXISTS t (a);"))
    store.close()
    store.close()
    with pytest.raises(RuntimeError, match="test store is closed"), store._read():
        pass


def test_call_runs_on_the_stores_own_named_thread_off_the_loop(tmp_path):
    store = SqliteStore(tmp_path / "s.db", Schema("CREATE TABLE IF NOT EXISTS t (a);"), worker="autod-t")

    async def main() -> tuple[str, str]:
        return threading.current_thread().name, await store.call(lambda: threading.current_thread().name)

    loop_thread, worker = asyncio.run(main())
    asyncio.run(store.aclose())
    assert worker.startswith("autod-t") and worker != loop_thread


def test_statements_runs_each_in_order(tmp_path):
    store = _store(tmp_path / "s.db", Schema("CREATE TABLE IF NOT EXISTS t (a);"))
    with store._write() as db:
        statements("INSERT INTO t VALUES (1)", "UPDATE t SET a = a + 1")(db)
        assert db.execute("SELECT a FROM t").fetchall() == [(2,)]
    store.close()
