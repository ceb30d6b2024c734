"""EventQueue: ordering, merging, coalescing, the bound, crash recovery and the async wrappers."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from autod.events import Event, EventKind, fingerprint
from autod.stores.queue import MAX_PATHS, EventQueue, QueueSchemaError, paths_fingerprint

T0 = datetime(2024, 1, 1, tzinfo=UTC)
POOL = [f"src/m{i}.py" for i in range(700)]


def ev(kind: EventKind, fp: str, *, source: str = "test", age_s: float = 0.0, **payload: object) -> Event:
    """An event created `age_s` seconds after T0 (so order by age is explicit)."""
    return Event(
        source=source, kind=kind, summary=f"{kind.value} {fp}", payload=dict(payload), fingerprint=fp,
        created_at=T0 + timedelta(seconds=age_s),
    )


def changed(source: str, *paths: str, age_s: float = 0.0) -> Event:
    return Event(
        source=source, kind=EventKind.FILES_CHANGED, summary=f"{len(paths)} changed",
        payload={"paths": list(paths)}, fingerprint=fingerprint("files_changed", *sorted(paths)),
        created_at=T0 + timedelta(seconds=age_s),
    )


@pytest.fixture
def qpath(tmp_path: Path) -> Path:
    return tmp_path / "state" / "queue.db"


@pytest.fixture
def queue(qpath: Path):
    q = EventQueue(qpath)
    yield q
    q.close()


def drain(q: EventQueue) -> list[Event]:
    out = []
    while (leased := q.lease()) is not None:
        out.append(leased.event)
        q.ack(leased.event.id)
    return out


def test_lease_hands_out_highest_priority_first_then_oldest(queue: EventQueue) -> None:
    sched = ev(EventKind.SCHEDULE, "s", age_s=0)
    chg = changed("watch:src", "a.py", age_s=1)
    manual = ev(EventKind.MANUAL, "m", age_s=2)
    build_new = ev(EventKind.BUILD_FAILED, "b2", age_s=4)
    check_old = ev(EventKind.CHECK_FAILED, "c1", age_s=3)
    for e in (sched, chg, manual, build_new, check_old):
        assert queue.put(e).accepted
    assert [e.id for e in drain(queue)] == [check_old.id, build_new.id, manual.id, chg.id, sched.id]
    assert queue.depth() == 0


def test_same_created_at_falls_back_to_insertion_order(queue: EventQueue) -> None:
    first, second = ev(EventKind.MANUAL, "x"), ev(EventKind.MANUAL, "y")
    queue.put(first)
    queue.put(second)
    assert [e.id for e in drain(queue)] == [first.id, second.id]


def test_lease_never_returns_an_in_flight_event(queue: EventQueue) -> None:
    only = ev(EventKind.MANUAL, "m")
    queue.put(only)
    leased = queue.lease()
    assert leased is not None and leased.event.id == only.id and leased.attempts == 1
    assert queue.lease() is None
    assert queue.depth() == 1
    assert queue.stats()["in_flight"] == 1


def test_lease_with_kinds_only_hands_out_those_kinds(queue: EventQueue) -> None:
    failure = ev(EventKind.BUILD_FAILED, "b")
    sched = ev(EventKind.SCHEDULE, "s")
    queue.put(failure)
    queue.put(sched)
    leased = queue.lease(kinds=["schedule"])
    assert leased is not None and leased.event.id == sched.id
    assert queue.lease(kinds=[EventKind.MANUAL]) is None
    assert queue.lease(kinds=[]) is None
    leased = queue.lease()
    assert leased is not None and leased.event.id == failure.id


def test_same_fingerprint_pending_events_merge_into_first_row(queue: EventQueue) -> None:
    first = ev(EventKind.CHECK_FAILED, "fp1", age_s=0, excerpt="old output")
    second = ev(EventKind.CHECK_FAILED, "fp1", age_s=5, excerpt="new output")
    second.merged = 3  # a source may hand over an already-coalesced event
    assert queue.put(first).id == first.id
    res = queue.put(second)
    assert res.accepted and res.merged and res.id == first.id
    assert queue.depth() == 1
    leased = queue.lease()
    assert leased is not None
    got = leased.event
    assert got.id == first.id
    assert got.merged == 4
    assert got.payload == {"excerpt": "new output"}
    assert got.summary == second.summary
    assert got.created_at == first.created_at
    assert queue.stats()["merged_total"] == 3


def test_merge_keeps_the_more_urgent_priority(queue: EventQueue) -> None:
    queue.put(ev(EventKind.SCHEDULE, "same", age_s=10))
    queue.put(ev(EventKind.MANUAL, "other", age_s=0))
    res = queue.put(ev(EventKind.BUILD_FAILED, "same", age_s=20))
    assert res.merged
    leased = queue.lease()
    assert leased is not None and leased.event.fingerprint == "same"
    assert leased.event.kind == EventKind.BUILD_FAILED


def test_a_non_failure_event_is_not_merged_into_an_in_flight_one(queue: EventQueue) -> None:
    first = ev(EventKind.MANUAL, "fp1")
    queue.put(first)
    assert queue.lease() is not None
    res = queue.put(ev(EventKind.MANUAL, "fp1"))
    assert res.accepted and not res.merged and res.id != first.id
    assert queue.depth() == 2
    again = queue.lease()
    assert again is not None and again.event.id == res.id and again.event.merged == 1


def test_a_failure_merges_into_the_same_failure_in_flight_so_one_cycle_works_on_it(queue: EventQueue) -> None:
    first = ev(EventKind.CHECK_FAILED, "fp1")
    queue.put(first)
    assert queue.lease() is not None
    dup = ev(EventKind.CHECK_FAILED, "fp1", excerpt="newer output")
    res = queue.put(dup)
    assert res.accepted and res.merged and res.id == first.id
    assert queue.depth() == 1 and queue.lease() is None  # no second row to plan after the fix
    queue.defer(first.id, 0, "still failing")  # the cycle did not resolve it: the row comes back, newest news
    again = queue.lease()
    assert again is not None and again.event.merged == 2 and again.event.payload["excerpt"] == "newer output"


def test_a_deferred_event_waits_until_due_and_status_sees_its_retries(queue: EventQueue) -> None:
    e = ev(EventKind.CHECK_FAILED, "fp")
    queue.put(e)
    leased = queue.lease(now=1000.0)
    assert leased is not None and leased.retries == 0
    assert queue.defer(e.id, 30, "LLM unavailable: 500", now=1000.0) == 1
    assert queue.lease(now=1029.0) is None
    assert queue.next_due(now=1010.0) == 20.0
    (row,) = queue.retrying()
    assert row["retries"] == 1 and row["not_before"] == 1030.0 and "500" in row["last_error"]
    again = queue.lease(now=1030.0)
    assert again is not None and again.retries == 1 and again.deferred_at == 1000.0
    queue.ack(e.id)
    assert queue.next_due() is None and queue.retrying() == []


def test_a_version_1_queue_is_migrated_keeping_its_events(qpath: Path) -> None:
    import autod.stores.queue_schema as q
    from autod.stores.sqlite import split_sql

    qpath.parent.mkdir(parents=True)
    con = sqlite3.connect(qpath)
    for statement in split_sql(q._SCHEMA):  # the version-1 schema, as an older autod left it
        con.execute(statement)
    con.execute(
        "INSERT INTO events (id, source, kind, summary, payload, fingerprint, created_at, created_ts,"
        " priority, status) VALUES ('old', 'check:tests', 'check_failed', 's', '{}', 'fp',"
        " '2024-01-01T00:00:00+00:00', 1704067200, 0, 'pending')"
    )
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    queue = EventQueue(qpath)
    try:
        leased = queue.lease()
        assert leased is not None and leased.event.id == "old" and leased.retries == 0
        assert queue.defer("old", 5, "retry") == 1
    finally:
        queue.close()


def test_files_changed_from_one_source_coalesce_with_union_of_paths(queue: EventQueue) -> None:
    a = changed("watch:src", "src/a.py", "src/b.py", age_s=0)
    b = changed("watch:src", "src/b.py", "src/c.py", age_s=1)
    other = changed("watch:docs", "docs/x.md", age_s=2)
    assert not queue.put(a).merged
    res = queue.put(b)
    assert res.merged and res.id == a.id
    assert not queue.put(other).merged
    assert queue.depth() == 2
    got = {e.source: e for e in queue.pending()}
    src = got["watch:src"]
    assert src.payload["paths"] == ["src/a.py", "src/b.py", "src/c.py"]
    assert src.fingerprint == fingerprint("files_changed", "src/a.py", "src/b.py", "src/c.py")
    assert src.merged == 2 and src.created_at == a.created_at
    assert got["watch:docs"].payload["paths"] == ["docs/x.md"]


def test_files_changed_paths_are_capped_and_overflow_counted(queue: EventQueue) -> None:
    queue.put(changed("watch:src", *[f"a{i:04}.py" for i in range(400)]))
    queue.put(changed("watch:src", *[f"b{i:04}.py" for i in range(300)]))
    (only,) = queue.pending()
    assert len(only.payload["paths"]) == MAX_PATHS
    assert only.payload["more"] == 700 - MAX_PATHS


def test_files_changed_storm_is_one_pending_event_per_source(queue: EventQueue) -> None:
    storm = [changed(f"watch:{i % 3}", f"f{i}.py", age_s=i) for i in range(300)]
    results = queue.put_many(storm)
    assert all(r.accepted for r in results)
    assert sum(not r.merged for r in results) == 3
    assert queue.depth() == 3
    assert sum(e.merged for e in queue.pending()) == 300


def test_full_queue_evicts_the_oldest_event_of_the_lowest_priority(qpath: Path) -> None:
    q = EventQueue(qpath, max_pending=4)
    try:
        keep = [
            ev(EventKind.CHECK_FAILED, "c", age_s=0),
            ev(EventKind.MANUAL, "m", age_s=1),
            changed("watch:src", "a.py", age_s=2),
        ]
        old_sched = ev(EventKind.SCHEDULE, "s1", age_s=3)
        for e in (*keep, old_sched):
            q.put(e)
        newcomer = ev(EventKind.MANUAL, "m2", age_s=9)
        with capture_logs() as logs:
            res = q.put(newcomer)
        assert res.accepted and res.dropped_id == old_sched.id
        assert {e.id for e in q.pending()} == {*(e.id for e in keep), newcomer.id}
        dropped = [entry for entry in logs if entry.get("dropped_id") == old_sched.id]
        assert dropped and dropped[0]["log_level"] == "warning" and dropped[0]["fingerprint"] == "s1"
        # Next victim: the files_changed event (schedule is gone), then the oldest manual.
        res = q.put(ev(EventKind.BUILD_FAILED, "b", age_s=10))
        assert res.dropped_id == keep[2].id
        res = q.put(ev(EventKind.CHECK_FAILED, "c2", age_s=11))
        assert res.dropped_id == keep[1].id
        assert q.stats()["dropped_total"] == 3
        assert q.depth() == 4
    finally:
        q.close()


def test_failure_events_are_never_dropped_even_above_the_bound(qpath: Path) -> None:
    q = EventQueue(qpath, max_pending=2)
    try:
        failures = [ev(EventKind.BUILD_FAILED, f"b{i}", age_s=i) for i in range(5)]
        with capture_logs() as logs:
            results = [q.put(e) for e in failures]
        assert all(r.accepted and r.dropped_id is None for r in results)
        assert q.depth() == 5
        assert any(e["event"] == "queue.over_bound" for e in logs)
        assert q.stats()["dropped_total"] == 0
        # A non-failure newcomer can then sit above the bound once, and replaces its own kind after.
        first_sched = q.put(ev(EventKind.SCHEDULE, "s1", age_s=10))
        assert first_sched.accepted and first_sched.dropped_id is None
        second_sched = q.put(ev(EventKind.SCHEDULE, "s2", age_s=11))
        assert second_sched.dropped_id == first_sched.id
        assert {e.id for e in failures} <= {e.id for e in q.pending(limit=100)}
    finally:
        q.close()


def test_newcomer_less_urgent_than_every_droppable_event_is_refused(qpath: Path) -> None:
    q = EventQueue(qpath, max_pending=2)
    try:
        manuals = [ev(EventKind.MANUAL, f"m{i}", age_s=i) for i in range(2)]
        for e in manuals:
            q.put(e)
        res = q.put(ev(EventKind.SCHEDULE, "s", age_s=5))
        assert not res.accepted and res.dropped_id is None
        assert {e.id for e in q.pending()} == {e.id for e in manuals}
        assert q.stats()["dropped_total"] == 1
    finally:
        q.close()


def test_recover_after_crash_hands_out_same_event_with_attempts_and_done_modes(qpath: Path) -> None:
    q = EventQueue(qpath)
    e = ev(EventKind.CHECK_FAILED, "fp")
    q.put(e)
    leased = q.lease()
    assert leased is not None and leased.attempts == 1 and leased.done_modes == []
    q.mark_done(e.id, "auto-debug")
    q.mark_done(e.id, "auto-debug")  # idempotent
    q.close()  # the process "dies" between lease and ack

    q = EventQueue(qpath)
    try:
        assert q.lease() is None  # still in_flight until recovered
        assert q.recover() == 1
        again = q.lease()
        assert again is not None
        assert again.event.id == e.id
        assert again.attempts == 2
        assert again.done_modes == ["auto-debug"]
        assert q.recover() == 1 and q.recover() == 0
    finally:
        q.close()


def test_acked_event_is_never_returned_again_after_reopen(qpath: Path) -> None:
    q = EventQueue(qpath)
    done, waiting = ev(EventKind.MANUAL, "a", age_s=0), ev(EventKind.SCHEDULE, "b", age_s=1)
    q.put(done)
    q.put(waiting)
    leased = q.lease()
    assert leased is not None and leased.event.id == done.id
    q.ack(done.id)
    q.ack(done.id)  # idempotent
    q.close()

    q = EventQueue(qpath)
    try:
        q.recover()
        assert [e.id for e in drain(q)] == [waiting.id]
    finally:
        q.close()


def test_release_puts_an_in_flight_event_back_to_pending(queue: EventQueue) -> None:
    e = ev(EventKind.MANUAL, "m")
    queue.put(e)
    first = queue.lease()
    assert first is not None
    queue.release(e.id)
    again = queue.lease()
    assert again is not None and again.event.id == e.id and again.attempts == 2
    queue.release(e.id)
    third = queue.lease()
    assert third is not None and third.attempts == 3


def test_two_handles_on_one_file_see_each_others_writes(qpath: Path) -> None:
    daemon, cli = EventQueue(qpath), EventQueue(qpath)
    try:
        e = ev(EventKind.MANUAL, "m")
        cli.put(e)
        leased = daemon.lease()
        assert leased is not None and leased.event.id == e.id
        assert cli.stats()["in_flight"] == 1
    finally:
        daemon.close()
        cli.close()


def test_database_uses_wal_and_records_schema_version(qpath: Path) -> None:
    EventQueue(qpath).close()
    con = sqlite3.connect(qpath)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute("PRAGMA user_version").fetchone()[0] == 3
    finally:
        con.close()


def test_newer_schema_version_is_a_clear_error(qpath: Path) -> None:
    EventQueue(qpath).close()
    con = sqlite3.connect(qpath)
    con.execute("PRAGMA user_version = 7")
    con.commit()
    con.close()
    with pytest.raises(QueueSchemaError, match=r"version 7 is newer.*\(3\)"):
        EventQueue(qpath)


def test_stats_report_pending_per_kind_in_flight_and_age(queue: EventQueue) -> None:
    assert queue.stats()["oldest_age_s"] is None
    queue.put(ev(EventKind.MANUAL, "m"))
    queue.put(ev(EventKind.MANUAL, "m2"))
    queue.put(ev(EventKind.SCHEDULE, "s"))
    queue.lease()
    stats = queue.stats()
    assert stats["pending"]["manual"] == 1 and stats["pending"]["schedule"] == 1
    assert stats["pending"]["build_failed"] == 0
    assert stats["in_flight"] == 1 and stats["pending_total"] == 2
    assert stats["oldest_age_s"] > 0  # created at T0, long ago


def test_closed_queue_refuses_use(qpath: Path) -> None:
    q = EventQueue(qpath)
    q.close()
    q.close()
    with pytest.raises(RuntimeError, match="closed"):
        q.put(ev(EventKind.MANUAL, "m"))


def test_async_wrappers_run_on_one_worker_thread_off_the_loop(queue: EventQueue) -> None:
    seen_threads: set[int] = set()
    original_put = queue.put

    def spying_put(event: Event):
        seen_threads.add(threading.get_ident())
        return original_put(event)

    queue.put = spying_put  # type: ignore[method-assign]

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        events = [ev(EventKind.MANUAL, f"m{i}", age_s=i) for i in range(5)]
        results = await asyncio.gather(*(queue.aput(e) for e in events))
        assert all(r.accepted for r in results)
        assert loop_thread not in seen_threads and len(seen_threads) == 1
        leased = await queue.alease(kinds=["manual"])
        assert leased is not None and leased.event.id == results[0].id
        await queue.amark_done(leased.event.id, "auto-debug")
        await queue.aack(leased.event.id)
        second = await queue.alease()
        assert second is not None
        await queue.arelease(second.event.id)
        assert await queue.adepth() == 4
        assert (await queue.astats())["in_flight"] == 0
        await queue.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await queue.adepth()

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_paths_fingerprint_equals_the_event_contract_fingerprint() -> None:
    paths = ["src/a.py", "/tmp/pytest-1/x.py", "docs/index 12:30:01.md", "src/ünï.py"]
    assert paths_fingerprint(sorted(paths)) == fingerprint("files_changed", *sorted(paths))
    assert paths_fingerprint([]) == fingerprint("files_changed")


def assert_batch_ends_like_one_put_per_event(tmp_path: Path, events: list[Event], max_pending: int) -> None:
    one_by_one = EventQueue(tmp_path / "a.db", max_pending=max_pending)
    batched = EventQueue(tmp_path / "b.db", max_pending=max_pending)
    try:
        singles = [one_by_one.put(e) for e in events]
        many = batched.put_many(events)
        assert singles == many

        def snapshot(q: EventQueue) -> list[tuple]:
            rows = q.pending(limit=1000)
            return [(e.id, e.kind, e.fingerprint, e.payload, e.summary, e.merged) for e in rows]

        assert snapshot(one_by_one) == snapshot(batched)
        assert one_by_one.stats() | {"oldest_age_s": 0} == batched.stats() | {"oldest_age_s": 0}
    finally:
        one_by_one.close()
        batched.close()


@pytest.mark.slow
def test_put_many_ends_in_the_same_state_as_one_put_per_event(tmp_path: Path) -> None:
    rng = random.Random(7)
    first = changed("watch:src", "a.py")
    events: list[Event] = [first]
    for i in range(400):
        r = rng.random()
        if r < 0.6:
            source = f"watch:{rng.choice(['src', 'docs'])}"
            events.append(changed(source, *rng.sample(POOL, rng.randint(1, 3))))
        elif r < 0.8:
            # Same fingerprint as the first files_changed event had before its paths grew.
            events.append(ev(EventKind.MANUAL, first.fingerprint, age_s=i))
        else:
            events.append(ev(EventKind.CHECK_FAILED, f"c{rng.randrange(5)}", age_s=i))
    assert_batch_ends_like_one_put_per_event(tmp_path, events, max_pending=10_000)


FP_AB = fingerprint("files_changed", "a", "b")


@pytest.mark.parametrize(
    ("events", "max_pending"),
    [
        pytest.param(  # the union's fingerprint is unchanged on disk, then a manual event merges into it
            [changed("w", "a", "b"), changed("w", "a"), ev(EventKind.MANUAL, FP_AB)],
            10, id="cross-kind-merge-into-grown-row",
        ),
        pytest.param(  # the union only now carries the manual event's fingerprint
            [changed("w", "a"), changed("w", "b"), ev(EventKind.MANUAL, FP_AB)],
            10, id="fingerprint-reached-by-growth",
        ),
        pytest.param(  # the grown row is evicted in the same batch
            [changed("w", "a"), changed("w", "b"), ev(EventKind.MANUAL, "m"), changed("w", "c")],
            1, id="grown-row-evicted",
        ),
    ],
)
def test_put_many_edge_cases_end_like_one_put_per_event(
    tmp_path: Path, events: list[Event], max_pending: int
) -> None:
    assert_batch_ends_like_one_put_per_event(tmp_path, events, max_pending)


def test_a_failure_back_after_a_restart_is_worked_on_though_its_row_was_handled(queue: EventQueue) -> None:
    # the cycle finished (its mode marked done) but the daemon stopped before the ack: the row is requeued
    # at start-up, and the start-up check finds the failure again and merges into it
    first = ev(EventKind.CHECK_FAILED, "fp1")
    queue.put(first)
    assert queue.lease() is not None
    queue.mark_done(first.id, "auto-debug")
    assert queue.recover() == 1
    before = time.time()
    res = queue.put(ev(EventKind.CHECK_FAILED, "fp1", excerpt="back again"))
    assert res.merged and res.id == first.id
    again = queue.lease()
    assert again is not None and again.done_modes == [] and again.event.payload["excerpt"] == "back again"
    assert again.deferred_at is not None and again.deferred_at >= before  # earlier cycles do not count
