"""The memory's local ledger (spool, drop counts, tally) and the abandonable memory thread."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from autod.memory.identity import ID_FILE, Identity, instance_id
from autod.memory.spool import FILE_NAME, Spool
from autod.memory.worker import StoreTimeout, Worker


def test_spool_keeps_writes_in_order_across_a_reopen_in_a_0600_file(tmp_path: Path) -> None:
    spool = Spool(tmp_path / FILE_NAME)
    spool.append("n0", "a", "obs", {"ts": 1.0})
    spool.append("n2", "b", "lesson", {"fingerprint": "fp"}, success=False)
    spool.append("used", "c", "", {}, ts=7.0)
    spool.close()
    again = Spool(tmp_path / FILE_NAME)
    rows = again.head(10)
    assert [(r.kind, r.item_id, r.text) for r in rows] == [("n0", "a", "obs"), ("n2", "b", "lesson"),
                                                            ("used", "c", "")]
    assert rows[1].success is False and rows[1].meta == {"fingerprint": "fp"} and rows[2].ts == 7.0
    again.ack(rows[:2])
    assert [r.item_id for r in again.head(10)] == ["c"] and len(again) == 1
    assert again.last_seq(("n1", "n2")) == 0 and again.last_seq(("used",)) == rows[2].seq
    assert (tmp_path / FILE_NAME).stat().st_mode & 0o777 == 0o600


def test_a_full_spool_drops_marks_then_observations_then_episodes_and_counts_them(tmp_path: Path) -> None:
    spool = Spool(tmp_path / FILE_NAME, max_items=4)
    spool.append("n2", "l", "lesson", {})
    spool.append("n1", "e", "episode", {})
    spool.append("n0", "o1", "obs", {})
    spool.append("used", "u", "", {})
    assert spool.append("n0", "o2", "obs", {})[1] == {"used": 1}
    assert spool.append("n0", "o3", "obs", {})[1] == {"n0": 1}  # the oldest observation goes
    assert spool.append("n2", "l2", "lesson", {})[1] == {"n0": 1}
    assert spool.append("n2", "l3", "lesson", {})[1] == {"n0": 1}
    assert spool.append("n2", "l4", "lesson", {})[1] == {"n1": 1}
    assert [r.item_id for r in spool.head(10)] == ["l", "l2", "l3", "l4"]
    spool.drop(spool.head(1))  # a write the store kept refusing
    spool.close()
    assert Spool(tmp_path / FILE_NAME).dropped() == {"n0": 3, "n1": 1, "n2": 1, "used": 1}


def test_tally_counts_own_items_and_their_time_range(tmp_path: Path) -> None:
    spool = Spool(tmp_path / FILE_NAME)
    spool.tally_added("n0", 3, 10.0, 30.0)
    spool.tally_added("n0", 2, 5.0, 20.0)
    spool.tally_removed("n0", 1, older_than=8.0)
    assert spool.tally()["n0"] | {"reconciled": None} == {"own": 4, "oldest_ts": 8.0, "newest_ts": 30.0,
                                                          "reconciled": None}
    spool.tally_set("n0", 9)
    assert spool.tally()["n0"]["own"] == 9 and spool.tally()["n0"]["reconciled"] is not None
    read_only = Spool.existing(tmp_path)
    assert read_only is not None and read_only.tally()["n0"]["own"] == 9
    assert Spool.existing(tmp_path / "nowhere") is None


def test_instance_id_is_made_once_per_state_dir_and_spreads_a_fleet(tmp_path: Path) -> None:
    first = instance_id(tmp_path)
    assert instance_id(tmp_path) == first and len(first) == 16
    assert (tmp_path / ID_FILE).stat().st_mode & 0o777 == 0o600
    assert instance_id(tmp_path / "other", create=False) == "0" * 16
    assert not (tmp_path / "other").exists()
    offsets = {Identity(instance_id(tmp_path / f"d{i}"), "/ws").share(3600) for i in range(20)}
    assert len(offsets) > 10 and all(0 <= o < 3600 for o in offsets)


@pytest.mark.slow
def test_a_stuck_job_hits_its_deadline_and_the_worker_is_left_behind() -> None:
    release = threading.Event()

    async def body() -> None:
        worker = Worker("test-memory")
        with pytest.raises(StoreTimeout, match=r"took longer than 0\.2 s"):
            await worker.run(release.wait, 30, timeout=0.2)
        assert worker.abandoned and worker.alive
        with pytest.raises(RuntimeError):
            worker.submit(print)
        release.set()
        await asyncio.to_thread(worker._thread.join, 30)
        assert not worker.alive

    asyncio.run(body())


@pytest.mark.slow
def test_a_process_exits_although_its_memory_thread_is_stuck_for_good(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        from autod.memory.worker import StoreTimeout, Worker

        async def main():
            try:
                await Worker().run(threading.Event().wait, timeout=0.2)
            except StoreTimeout:
                print("timed out", flush=True)

        asyncio.run(main())
        """
    )
    # a ThreadPoolExecutor's worker would be joined at exit and hang here for good
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "timed out\n", done.stderr


def test_the_prune_spread_never_exceeds_half_the_schedule_period() -> None:
    from autod.config.settings import MemoryConfig
    from autod.memory.resilient import prune_spread

    assert prune_spread(MemoryConfig()) == 3600  # daily: an hour
    assert prune_spread(MemoryConfig(prune_schedule="* * * * *")) == 30  # every minute: half a minute
    assert prune_spread(MemoryConfig(prune_schedule="*/10 * * * *", prune_spread_s=0)) == 0
