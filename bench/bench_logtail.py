"""Log ingestion rate through LogtailSource (from_start) next to `grep -c` on the same file.

Prints one JSON document. `--quick` uses 10 MB instead of 100 MB. Both sides read the same
file from a warm page cache and each is timed as its best of RUNS runs: grep from spawn to exit,
autod from the source's start until it has saved a read position at the end of the file (so
every event is out). Every planted error carries a unique id; the run fails unless each id is
reported exactly once and nothing else is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autod.config.settings import LogtailSource as LogtailConfig
from autod.sources.logtail import LogtailSource, state_file

NOISE = [
    "[info] compiling module {i} (cache hit)",
    "2024-05-14T09:12:{s:02}.123Z [build] cc -O2 -Wall -c src/mod{i}.c -o build/mod{i}.o",
    "    Finished step {i} in 0.{s}s",
    "DEBUG worker-{s}: heartbeat ok, queue depth {i}",
]


def planted(kind: str, n: int) -> str:
    """One unique error of each detector kind, tagged with the marker grep counts."""
    if kind == "gcc":
        return f"src/f{n}.c:{n % 90 + 1}:5: error: 'v{n}' undeclared (PLANTED)\n"
    if kind == "python":
        return (
            "Traceback (most recent call last):\n"
            f'  File "src/job{n}.py", line {n % 50 + 1}, in run\n'
            "    step()\n"
            f"ValueError: bad input {n} (PLANTED)\n"
        )
    if kind == "go":
        return f"./pkg{n}.go:{n % 70 + 1}:3: undefined: sym{n} (PLANTED)\n"
    if kind == "tsc":
        return f"src/c{n}.ts({n % 40 + 1},7): error TS2322: Type 'T{n}' is not assignable (PLANTED).\n"
    return f"error[E0308]: mismatched types m{n} (PLANTED)\n --> src/r{n}.rs:{n % 30 + 1}:9\n\n"


def make_log(path: Path, size: int, errors: int) -> int:
    rng = random.Random(7)
    kinds = ["gcc", "python", "go", "tsc", "cargo"]
    every = size // errors
    written = 0
    n = 0
    next_error = every // 2
    with open(path, "w") as f:
        i = 0
        while written < size:
            line = rng.choice(NOISE).format(i=i, s=i % 60) + "\n"
            i += 1
            if written >= next_error and n < errors:
                line += planted(kinds[n % len(kinds)], n)
                n += 1
                next_error += every
            f.write(line)
            written += len(line)
    return n


RUNS = 3
PLANTED_ID = re.compile(r"(\d+)\D{0,30}\(PLANTED\)")  # the id is the last number before the marker


async def ingest(log: Path, work: Path) -> dict[str, object]:
    state = work / "state"
    for old in state.glob("logtail/*.json"):
        old.unlink()  # each run reads the whole file again
    cfg = LogtailConfig(type="logtail", path=str(log), from_start=True, poll_s=0.05)
    source = LogtailSource(cfg, work, state)
    found = 0
    fingerprints: set[str] = set()
    ids: list[int] = []
    size = log.stat().st_size
    start = time.perf_counter()
    cpu0 = time.process_time()

    async def consume() -> None:
        nonlocal found
        async for ev in source.events():
            found += 1
            fingerprints.add(ev.fingerprint)
            m = PLANTED_ID.search(ev.summary)
            ids.append(int(m.group(1)) if m else -1)

    task = asyncio.create_task(consume())
    sf = state_file(work / "state", log)
    deadline = start + 600
    while time.perf_counter() < deadline:
        await asyncio.sleep(0.002)
        try:
            if json.loads(sf.read_text())["offset"] >= size:
                break
        except (OSError, ValueError, KeyError):
            pass
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return {"seconds": elapsed, "cpu_s": cpu, "events": found, "distinct": len(fingerprints), "ids": ids}


def grep_count(log: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    out = subprocess.run(["grep", "-c", "PLANTED", str(log)], capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, int(out.stdout.strip() or 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    mb = 10 if args.quick else 100
    errors = 50 if args.quick else 300
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        log = work / "build.log"
        n = make_log(log, mb << 20, errors)
        size_mb = log.stat().st_size / (1 << 20)
        log.read_bytes()  # warm the page cache for both sides
        greps = [grep_count(log) for _ in range(RUNS)]
        runs = [asyncio.run(ingest(log, work)) for _ in range(RUNS)]
    grep_s, grep_lines = min(greps)
    best = min(runs, key=lambda r: r["seconds"])
    ours_rate = size_mb / best["seconds"]
    grep_rate = size_mb / grep_s
    once = all(sorted(r["ids"]) == list(range(n)) for r in runs)  # type: ignore[call-overload]
    out = {
        "bench": "logtail",
        "profile": "quick" if args.quick else "full",
        "file_mb": round(size_mb, 1),
        "runs": RUNS,
        "planted": n,
        "grep_marker_lines": grep_lines,
        "found": best["events"],
        "found_distinct": best["distinct"],
        "logtail_seconds": round(best["seconds"], 3),  # type: ignore[call-overload]
        "logtail_seconds_all": [round(r["seconds"], 3) for r in runs],  # type: ignore[call-overload]
        "logtail_cpu_s": round(best["cpu_s"], 3),  # type: ignore[call-overload]
        "logtail_mb_s": round(ours_rate, 1),
        "grep_seconds": round(grep_s, 4),
        "grep_seconds_all": [round(g, 4) for g, _ in greps],
        "grep_mb_s": round(grep_rate, 1),
        "ratio_vs_grep": round(ours_rate / grep_rate, 3),
        "goal_ratio": 0.333,
        "every_planted_found_once": once,
    }
    print(json.dumps(out, indent=2))
    print(f"found/planted: {best['events']}/{n}", file=sys.stderr)
    if not out["every_planted_found_once"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
