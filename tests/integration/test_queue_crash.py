"""A real crash: a child process works the queue and is SIGKILLed at seeded random instants.

Every put the child saw return (it prints the id after put returns and flushes) must be in the
queue after reopening, unless the child went on to ack it; an acked event never comes back; an
event leased and not acked is still there (in_flight until recover()); the file passes integrity_check.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from autod.stores.queue import EventQueue

pytestmark = pytest.mark.slow

RUNS = 10

CHILD = textwrap.dedent(
    """
    import random, sys
    from pathlib import Path
    from autod.events import Event, EventKind, fingerprint
    from autod.stores.queue import EventQueue

    q = EventQueue(Path(sys.argv[1]), max_pending=1_000_000)
    rng = random.Random(int(sys.argv[2]))
    leased = []

    def make():
        r = rng.random()
        if r < 0.3:
            paths = [f"src/m{rng.randrange(200)}.py" for _ in range(rng.randrange(1, 4))]
            return Event(source=f"watch:{rng.randrange(2)}", kind=EventKind.FILES_CHANGED, summary="chg",
                         payload={"paths": paths}, fingerprint=fingerprint("files_changed", *sorted(paths)))
        kind = rng.choice([EventKind.CHECK_FAILED, EventKind.BUILD_FAILED, EventKind.MANUAL])
        excerpt = "e" * rng.randrange(500)
        return Event(source="check:tests", kind=kind, summary="x", payload={"excerpt": excerpt},
                     fingerprint=f"fp{rng.randrange(300)}")

    print("ready", flush=True)
    while True:
        r = rng.random()
        if r < 0.6:
            print("put", q.put(make()).id, flush=True)
        elif r < 0.75:
            for res in q.put_many([make() for _ in range(rng.randrange(1, 20))]):
                print("put", res.id, flush=True)
        elif r < 0.88:
            got = q.lease()
            if got is not None:
                leased.append(got.event.id)
                print("lease", got.event.id, flush=True)
        elif leased:
            target = leased.pop(rng.randrange(len(leased)))
            print("acking", target, flush=True)
            q.mark_done(target, "auto-debug")
            q.ack(target)
            print("acked", target, flush=True)
    """
)


def run_child_until_killed(db: Path, seed: int, delay_s: float) -> list[tuple[str, str]]:
    """Start the child, SIGKILL it `delay_s` after it is ready; return its complete output lines."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    chunks: list[bytes] = []
    ready = threading.Event()

    def reader() -> None:  # keep draining so the child never blocks on a full pipe
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            chunks.append(line)
            if line == b"ready\n":
                ready.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        if not ready.wait(timeout=60):  # hang guard only
            raise AssertionError(f"child never became ready: {proc.stderr.read() if proc.poll() else ''!r}")
        time.sleep(delay_s)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        thread.join(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    # A line without its newline was cut by the kill: the child did not finish saying it.
    lines = [c.decode().split() for c in chunks if c.endswith(b"\n") and c != b"ready\n"]
    return [(parts[0], parts[1]) for parts in lines if len(parts) == 2]


def test_every_returned_put_survives_sigkill_and_acked_events_never_return(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    rng = random.Random(20240601)
    put_ids: set[str] = set()
    acking: set[str] = set()
    acked: set[str] = set()
    total_lines = 0
    for run in range(RUNS):
        lines = run_child_until_killed(db, seed=rng.randrange(1 << 30), delay_s=rng.uniform(0.05, 0.6))
        total_lines += len(lines)
        leased_now: set[str] = set()
        for verb, event_id in lines:
            if verb == "put":
                put_ids.add(event_id)
            elif verb == "lease":
                leased_now.add(event_id)
            elif verb == "acking":
                acking.add(event_id)
            elif verb == "acked":
                acked.add(event_id)
        leased_now -= acking

        con = sqlite3.connect(db)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"run {run}"
            rows = {eid: (status, attempts) for eid, status, attempts in
                    con.execute("SELECT id, status, attempts FROM events")}
        finally:
            con.close()

        missing = put_ids - acking - rows.keys()
        assert not missing, f"run {run}: accepted events lost: {sorted(missing)[:5]}"
        assert not (acked & rows.keys()), f"run {run}: acked events came back"
        for eid in leased_now:
            assert rows[eid][0] == "in_flight" and rows[eid][1] >= 1, f"run {run}: lease of {eid} not durable"

        # What the daemon does at start-up; the next child then sees these as pending again.
        q = EventQueue(db)
        try:
            assert q.recover() == sum(1 for status, _ in rows.values() if status == "in_flight")
            assert q.depth() == len(rows)
        finally:
            q.close()

    print(f"{total_lines} lines, {len(put_ids)} put ids, {len(acked)} acked")
    assert put_ids and acked, f"the child did too little work to test anything ({total_lines} lines)"
