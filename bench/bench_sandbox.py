"""Benchmark: what the check sandbox adds to one check run, side by side in the same run.

The same check goes through `run_check` three ways, interleaved so machine noise hits them alike:
  raw       the command exec'd directly (asyncio subprocess, own pipe): the floor
  off       `run_check` with `sandbox: off` (scrubbed env, private HOME/TMPDIR, the reaper)
  bwrap     `run_check` under bubblewrap (the default when bwrap works)
for two commands: `true` (pure overhead) and `python -c "import json"` (an interpreter whose
runtime the sandbox binds back). Goal: bwrap adds < 50 ms per run over the bare exec. Prints one
JSON document (p50/p95 per way and the paired differences).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autod.checks import sandbox
from autod.checks.run import run_check
from autod.config.settings import CheckConfig

GOAL_MS = 50.0
FILES = 300  # a small repository: run_check stats the tree before and after, both ways alike


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return round(ordered[k], 2)


async def raw(argv: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    r, w = os.pipe()
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=str(cwd), stdin=asyncio.subprocess.DEVNULL, stdout=w, stderr=w, start_new_session=True
    )
    os.close(w)
    await proc.wait()
    os.close(r)
    return (time.perf_counter() - t0) * 1000


async def via_run_check(cmd: str, mode: str, cwd: Path) -> float:
    t0 = time.perf_counter()
    result = await run_check("bench", CheckConfig(run=cmd, sandbox=mode, timeout_s=60), cwd)
    elapsed = (time.perf_counter() - t0) * 1000
    if not result.ok or result.sandbox != mode:
        raise SystemExit(f"{mode} run failed: {result.error or result.output[-500:]}")
    return elapsed


async def measure(cmd: str, reps: int, cwd: Path) -> dict[str, Any]:
    argv = shlex.split(cmd)
    times: dict[str, list[float]] = {"raw": [], "off": [], "bwrap": []}
    for _ in range(3):  # warm-up: page cache, the probe
        await via_run_check(cmd, "bwrap", cwd)
        await via_run_check(cmd, "off", cwd)
    for _ in range(reps):
        times["raw"].append(await raw(argv, cwd))
        times["off"].append(await via_run_check(cmd, "off", cwd))
        times["bwrap"].append(await via_run_check(cmd, "bwrap", cwd))
    out: dict[str, Any] = {
        way: {"p50_ms": pct(v, 50), "p95_ms": pct(v, 95), "mean_ms": round(statistics.fmean(v), 2)}
        for way, v in times.items()
    }
    for a, b in (("bwrap", "raw"), ("bwrap", "off"), ("off", "raw")):
        paired = [x - y for x, y in zip(times[a], times[b], strict=True)]
        out[f"{a}_minus_{b}_ms"] = {"p50": pct(paired, 50), "p95": pct(paired, 95)}
    # Against the bare exec (what a check cost before the sandbox), not against `off`, whose
    # session keeper is itself a Python start.
    out["goal_met"] = out["bwrap_minus_raw_ms"]["p50"] < GOAL_MS
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 repetitions instead of 200")
    ap.add_argument("--reps", type=int, default=None)
    args = ap.parse_args(argv)
    reps = args.reps or (30 if args.quick else 200)
    verdict = sandbox.probe()
    if not verdict.works:
        print(json.dumps({"skipped": True, "why": verdict.why}))
        return 1
    with tempfile.TemporaryDirectory(prefix="autod-bench-sandbox-") as tmp:
        ws = Path(tmp)
        (ws / ".git").mkdir()
        for i in range(FILES):
            (ws / f"mod{i % 10}").mkdir(exist_ok=True)
            (ws / f"mod{i % 10}" / f"f{i}.py").write_text(f"x = {i}\n")
        doc = {
            "benchmark": "sandbox",
            "reps": reps,
            "goal_added_ms": GOAL_MS,
            "bwrap": verdict.bwrap,
            "checks": {
                "true": asyncio.run(measure("true", reps, ws)),
                "python": asyncio.run(measure(f"{sys.executable} -c 'import json'", reps, ws)),
            },
        }
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
