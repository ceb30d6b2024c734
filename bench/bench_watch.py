"""Save-to-event latency of WatchSource next to raw watchfiles.awatch, and a 10,000-file burst.

Prints one JSON document. `--quick` uses 20 saves and a 2,000-file burst.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import watchfiles

from autod.config.settings import WatchSource as WatchConfig
from autod.ownwrites import OwnWrites
from autod.sources.watch import WatchSource

SETTLE_MS = 100


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def source_latency(ws: Path, saves: int) -> list[float]:
    cfg = WatchConfig(type="watch", paths=["src"], settle_ms=SETTLE_MS)
    source = WatchSource(cfg, ws, ws / ".state", OwnWrites())
    gen = source.events()
    queue: asyncio.Queue[float] = asyncio.Queue()

    async def pump() -> None:
        async for _ in gen:
            queue.put_nowait(time.perf_counter())

    task = asyncio.create_task(pump())
    await asyncio.sleep(0.5)
    out = []
    for i in range(saves):
        t0 = time.perf_counter()
        (ws / "src" / "a.py").write_text(f"a = {i}\n")
        out.append((await asyncio.wait_for(queue.get(), 10)) - t0)
        await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return out


async def raw_latency(ws: Path, saves: int) -> list[float]:
    """Raw awatch settling the way watchfiles does it: `step` is the quiet time."""
    stop = asyncio.Event()
    queue: asyncio.Queue[float] = asyncio.Queue()

    async def pump() -> None:
        async for _ in watchfiles.awatch(ws / "src", step=SETTLE_MS, debounce=1600, stop_event=stop):
            queue.put_nowait(time.perf_counter())

    task = asyncio.create_task(pump())
    await asyncio.sleep(0.5)
    out = []
    for i in range(saves):
        t0 = time.perf_counter()
        (ws / "src" / "b.py").write_text(f"b = {i}\n")
        out.append((await asyncio.wait_for(queue.get(), 10)) - t0)
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 10)
    return out


async def burst(ws: Path, files: int) -> dict[str, float | int]:
    cfg = WatchConfig(type="watch", paths=["burst"], settle_ms=SETTLE_MS)
    (ws / "burst").mkdir()
    source = WatchSource(cfg, ws, ws / ".state", OwnWrites())
    events: list[int] = []

    async def pump() -> None:
        async for ev in source.events():
            events.append(len(ev.payload["paths"]) + ev.payload.get("more", 0))

    task = asyncio.create_task(pump())
    await asyncio.sleep(0.5)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for i in range(files):
        (ws / "burst" / f"f{i:05}.txt").write_text(str(i))
    write_s = time.perf_counter() - t0
    while sum(events) < files and time.perf_counter() - t0 < 60:
        await asyncio.sleep(0.05)
    done_s = time.perf_counter() - t0
    await asyncio.sleep(1.0)  # anything that would come later still counts
    cpu = time.process_time() - cpu0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return {
        "files": files,
        "events": len(events),
        "paths_reported": sum(events),
        "write_seconds": round(write_s, 3),
        "seconds_to_all_reported": round(done_s, 3),
        "cpu_seconds": round(cpu, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    saves = 20 if args.quick else 50
    files = 2000 if args.quick else 10_000
    with tempfile.TemporaryDirectory() as d:
        ws = Path(d)
        (ws / "src").mkdir()
        ours = asyncio.run(source_latency(ws, saves))
        raw = asyncio.run(raw_latency(ws, saves))
        b = asyncio.run(burst(ws, files))
    ms = [x * 1000 for x in ours]
    raw_ms = [x * 1000 for x in raw]
    out = {
        "bench": "watch",
        "profile": "quick" if args.quick else "full",
        "settle_ms": SETTLE_MS,
        "saves": saves,
        "watchsource_ms": {"p50": round(pct(ms, 50), 1), "p95": round(pct(ms, 95), 1)},
        "raw_awatch_ms": {"p50": round(pct(raw_ms, 50), 1), "p95": round(pct(raw_ms, 95), 1)},
        "overhead_beyond_settle_ms_p50": round(statistics.median(ms) - SETTLE_MS, 1),
        "raw_overhead_beyond_settle_ms_p50": round(statistics.median(raw_ms) - SETTLE_MS, 1),
        "burst": b,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
