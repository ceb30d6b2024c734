"""What the judge costs: a check's wall time with autod's recorder and import guard, against the same
check without them, side by side in one run, on real libraries' own test suites.

For each library (sdists from PyPI, the same set and cache as the real-library benches) the suite runs
as its check would (`autod.checks.run.run_check`, sandboxed like the daemon's), alternating the two
sides `--rounds` times so machine load falls on both alike. "Without" runs the same code with the
guard and recorder not loaded (what autod did before per-test verdicts). "Candidate" runs it as a
candidate's verification does: every module of the library named as the candidate's, so the reach guard
(autod.checks.judge_reach) watches every audited call. Prints one JSON document: per library the median
wall of each side, the ratios, and whether the recorder heard every test.

    python bench/bench_judge.py [--only parse,semver] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reallib_seed import LIBRARIES, extract

from autod.checks import pertest, run
from autod.config.models import CheckConfig


async def one(root: Path, check: CheckConfig, judged: bool, files: tuple[str, ...] = ()) -> tuple[float, Any]:
    original = pertest.loads_into
    if not judged:
        pertest.loads_into = lambda argv: False  # type: ignore[assignment]
    token = pertest.CANDIDATE_FILES.set(files)
    try:
        start = time.perf_counter()
        result = await run.run_check("tests", check, root)
        return time.perf_counter() - start, result
    finally:
        pertest.CANDIDATE_FILES.reset(token)
        pertest.loads_into = original  # type: ignore[assignment]


def bench_library(name: str, rounds: int, work: Path) -> dict[str, Any]:
    lib = LIBRARIES[name]
    root = extract(lib, work / name)
    check = CheckConfig(run=lib.command(), env=dict(lib.env), timeout_s=600)  # type: ignore[arg-type]
    sides: dict[str, list[float]] = {"with": [], "without": [], "candidate": []}
    heard: dict[str, Any] = {}
    files = tuple(sorted(p.relative_to(root).as_posix() for p in (root / lib.package).rglob("*.py")))
    asyncio.run(one(root, check, True))  # warm the file cache and byte code
    for _ in range(rounds):
        for side in ("without", "with", "candidate"):
            named = files if side == "candidate" else ()
            wall, result = asyncio.run(one(root, check, side != "without", named))
            sides[side].append(wall)
            if side == "with":
                tests = result.tests.record() if result.tests else None
                heard = {**heard, "exit_code": result.exit_code, "tests": tests}
            elif side == "candidate":
                tests = result.tests.record() if result.tests else None
                heard = {**heard, "exit_code_candidate": result.exit_code,
                         "same_as_with": tests == heard["tests"]}
            else:
                heard = {**heard, "exit_code_without": result.exit_code}
    w, wo = statistics.median(sides["with"]), statistics.median(sides["without"])
    c = statistics.median(sides["candidate"])
    return {"library": name, "version": lib.version, "rounds": rounds, "with_s": round(w, 3),
            "without_s": round(wo, 3), "candidate_s": round(c, 3), "ratio": round(w / wo, 4),
            "candidate_over_with": round(c / w, 4),
            "all_candidate": [round(x, 3) for x in sides["candidate"]],
            "all_with": [round(x, 3) for x in sides["with"]],
            "all_without": [round(x, 3) for x in sides["without"]], "recorded": heard}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="parse,semver,tabulate,cachetools")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="autod-bench-judge-") as tmp:
        rows = [bench_library(n, args.rounds, Path(tmp)) for n in args.only.split(",") if n]
    total_w = sum(r["with_s"] for r in rows)
    total_wo = sum(r["without_s"] for r in rows)
    total_c = sum(r["candidate_s"] for r in rows)
    print(json.dumps({"bench": "judge", "libraries": rows,
                      "total": {"with_s": round(total_w, 3), "without_s": round(total_wo, 3),
                                "candidate_s": round(total_c, 3),
                                "ratio": round(total_w / total_wo, 4) if total_wo else None,
                                "candidate_over_with": round(total_c / total_w, 4) if total_w else None}},
                     indent=1))


if __name__ == "__main__":
    main()
