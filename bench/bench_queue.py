"""Benchmark: an event storm into EventQueue vs raw sqlite inserts (same pragmas, no merge), same run.

100,000 events (10,000 with --quick) from a handful of sources and fingerprints: 90% through
put_many in batches of 1000, 10% as single puts (one transaction + fsync each). Each side runs in
its own child process so its peak RSS is its own. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autod.events import Event, EventKind, fingerprint
from autod.stores.queue import EventQueue

BATCH = 1000
SEED = 1234


def storm(n: int) -> list[Event]:
    """A save storm on 4 watched trees, 8 recurring failures and 2 schedules."""
    rng = random.Random(SEED)
    pool = [f"src/pkg{i % 20}/mod{i}.py" for i in range(2000)]
    events: list[Event] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6:
            paths = sorted(set(rng.sample(pool, rng.randint(1, 3))))
            events.append(Event(
                source=f"watch:tree{rng.randrange(4)}", kind=EventKind.FILES_CHANGED,
                summary=f"{len(paths)} files changed", payload={"paths": paths},
                fingerprint=fingerprint("files_changed", *paths),
            ))
        elif r < 0.9:
            k = rng.randrange(8)
            events.append(Event(
                source="check:tests", kind=EventKind.CHECK_FAILED if k % 2 else EventKind.BUILD_FAILED,
                summary=f"test_{k} failed",
                payload={"excerpt": f"AssertionError in test_{k}\n" * 20, "exit_code": 1},
                fingerprint=fingerprint("check_failed", f"test_{k}"),
            ))
        else:
            k = rng.randrange(2)
            events.append(Event(
                source="cron:nightly", kind=EventKind.SCHEDULE, summary="nightly plan",
                payload={"mode": "auto-plan"}, fingerprint=fingerprint("schedule", f"nightly{k}"),
            ))
    return events


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def run_queue(db: Path, events: list[Event], singles: int) -> dict:
    q = EventQueue(db, max_pending=10_000)
    batched = events[: len(events) - singles]
    t0 = time.perf_counter()
    for i in range(0, len(batched), BATCH):
        q.put_many(batched[i : i + BATCH])
    t1 = time.perf_counter()
    for event in events[len(events) - singles :]:
        q.put(event)
    t2 = time.perf_counter()
    stats = q.stats()
    depth = q.depth()
    q.close()
    return _figures(len(batched), singles, t0, t1, t2) | {
        "final_depth": depth, "merged_total": stats["merged_total"], "dropped_total": stats["dropped_total"],
    }


def run_baseline(db: Path, events: list[Event], singles: int) -> dict:
    """Plain inserts, one row per event, same journal/sync settings and transaction sizes."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = FULL")
    con.execute(
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, source TEXT, kind TEXT, summary TEXT,"
        " payload TEXT, fingerprint TEXT, created_at TEXT)"
    )
    sql = (
        "INSERT INTO events (id, source, kind, summary, payload, fingerprint, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)"
    )

    def row(e: Event) -> tuple:
        return (e.id, e.source, e.kind.value, e.summary, json.dumps(e.payload), e.fingerprint,
                e.created_at.isoformat())

    batched = events[: len(events) - singles]
    t0 = time.perf_counter()
    for i in range(0, len(batched), BATCH):
        con.execute("BEGIN IMMEDIATE")
        con.executemany(sql, [row(e) for e in batched[i : i + BATCH]])
        con.execute("COMMIT")
    t1 = time.perf_counter()
    for e in events[len(events) - singles :]:
        con.execute("BEGIN IMMEDIATE")
        con.execute(sql, row(e))
        con.execute("COMMIT")
    t2 = time.perf_counter()
    depth = con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    con.close()
    return _figures(len(batched), singles, t0, t1, t2) | {"final_depth": depth}


def _figures(batched: int, singles: int, t0: float, t1: float, t2: float) -> dict:
    return {
        "events_per_s": round((batched + singles) / (t2 - t0)),
        "put_many_events_per_s": round(batched / (t1 - t0)) if batched else None,
        "single_put_events_per_s": round(singles / (t2 - t1)) if singles else None,
        "elapsed_s": round(t2 - t0, 3),
    }


def phase(name: str, n: int, directory: Path) -> dict:
    events = storm(n)
    singles = n // 10
    before = rss_mb()
    db = directory / f"{name}.db"
    result = (run_queue if name == "queue" else run_baseline)(db, events, singles)
    return result | {"rss_after_generating_mb": before, "peak_rss_mb": rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10k events instead of 100k")
    parser.add_argument("--dir", type=Path, default=None, help="where the db files go (default: a temp dir)")
    parser.add_argument("--phase", choices=["queue", "baseline"], help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.n or (10_000 if args.quick else 100_000)

    if args.phase:  # child: one side only, so peak RSS is its own
        print(json.dumps(phase(args.phase, n, args.dir)))
        return

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = {}
        for name in ("baseline", "queue"):
            out = subprocess.run(
                [sys.executable, __file__, "--phase", name, "--n", str(n), "--dir", tmp],
                check=True, capture_output=True, text=True,
            ).stdout
            results[name] = json.loads(out)
    print(json.dumps({
        "benchmark": "queue_storm",
        "events": n,
        "single_puts": n // 10,
        "batch_size": BATCH,
        "sources": 4 + 2,
        "queue": results["queue"],
        "baseline_raw_sqlite": results["baseline"],
        "queue_vs_baseline_throughput": round(
            results["queue"]["events_per_s"] / results["baseline"]["events_per_s"], 3
        ),
    }, indent=2))


if __name__ == "__main__":
    main()
