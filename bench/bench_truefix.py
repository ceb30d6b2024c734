"""Does the judge keep the true fix? Real libraries, seeded bugs, the original code put back.

For each bug of bench/reallib_bugs.json (bugs seeded into real PyPI libraries none of us wrote): a
repository with the bug committed, its check run as autod's run before a candidate, then the library's
own original file put back (the true fix) and the check run as a candidate's verification runs it
(its file named: the reach guard on), and `decide` asked. Every verdict should be `fixed`; a rollback
here is the judge refusing a right fix. Side by side, the same runs judged as the judge did before the
controls of the sixth session (what each test ran and the hook implementations on a test's way left
out), so a verdict those controls changed is seen. No model, no network (the sdists come from the
bench cache, as bench_reallib's do).

    python bench/bench_truefix.py                     # every bug (~5-10 min on 2 cores)
    python bench/bench_truefix.py --per-library 3     # the first 3 bugs of each library
    python bench/bench_truefix.py --corpus            # bench_corpus's 92 bugs in twelve more libraries
    python bench/bench_truefix.py --corpus held_out   # its held-out half (dev: the other)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for extra in (ROOT, BENCH):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import corpus_seed  # noqa: E402
import reallib_seed  # noqa: E402
from bench_reallib import check_for  # noqa: E402
from reallib_e2e import make_repo  # noqa: E402
from reallib_seed import extract  # noqa: E402

from autod.checks.outcome import Before, decide  # noqa: E402
from autod.checks.pertest import CANDIDATE_FILES  # noqa: E402
from autod.checks.run import CheckResult, run_check  # noqa: E402
from autod.config.settings import CheckConfig  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def before_the_controls(run: CheckResult) -> CheckResult:
    """The run as the judge saw it before this session: no digests, no hook implementations named."""
    if run.tests is None:
        return run
    named = {n for n in run.tests.runner if " runs " in n or n.startswith("the function of ")}
    tests = dataclasses.replace(run.tests, ran={}, runner=run.tests.runner - named,
                                foreign=run.tests.foreign - named)
    return dataclasses.replace(run, tests=tests)


async def one(work: Path, pristine: Path, bug: dict[str, Any], libraries: dict[str, Any]) -> dict[str, Any]:
    lib = libraries[bug["library"]]
    repo = make_repo(work, pristine, bug)
    check = CheckConfig(**check_for(lib))
    start = time.monotonic()
    base = await run_check("tests", check, repo)
    (repo / bug["file"]).write_text((pristine / bug["file"]).read_text(encoding="utf-8"), encoding="utf-8")
    token = CANDIDATE_FILES.set((bug["file"],))
    try:
        after = await run_check("tests", check, repo)
    finally:
        CANDIDATE_FILES.reset(token)
    failing = base.tests.failing if base.tests is not None else frozenset()
    now = decide([after], Before(1, failing, {"tests": base}))
    then = decide([before_the_controls(after)], Before(1, failing, {"tests": before_the_controls(base)}))
    return {"bug": bug["id"], "library": bug["library"], "failing_before": len(failing),
            "status": now.status.value, "reason": now.reason,
            "status_before_controls": then.status.value, "reason_before_controls": then.reason,
            "tests_after": len(after.tests.outcomes) if after.tests is not None else None,
            "digested": len(after.tests.ran) if after.tests is not None else 0,
            "seconds": round(time.monotonic() - start, 1)}


async def run(bugs: list[dict[str, Any]], libraries: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-truefix-") as tmp:
        work = Path(tmp)
        pristine = {name: extract(libraries[name], work / f"src-{name}")
                    for name in dict.fromkeys(b["library"] for b in bugs)}
        for i, bug in enumerate(bugs, 1):
            try:
                row = await one(work, pristine[bug["library"]], bug, libraries)
            except Exception as exc:  # a bug whose tree cannot be made: named, not counted
                row = {"bug": bug["id"], "library": bug["library"], "error": f"{type(exc).__name__}: {exc}"}
            rows.append(row)
            log(f"[{i}/{len(bugs)}] {bug['id']}: {row.get('status', row.get('error'))}"
                f" (before the controls: {row.get('status_before_controls')}) {row.get('reason') or ''}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-library", type=int, default=0, help="the first N bugs of each library")
    ap.add_argument("--only", nargs="*", default=[], help="bug ids")
    ap.add_argument("--corpus", nargs="?", const="all", choices=("all", "dev", "held_out"),
                    help="bench_corpus's bugs (bench/corpus_bugs.json, twelve more libraries) in place of "
                         "bench_reallib's six; dev or held_out for one half")
    args = ap.parse_args(argv)
    if args.corpus:
        libraries = corpus_seed.LIBRARIES
        bugs = corpus_seed.load_bugs(None if args.corpus == "all" else args.corpus)
    else:
        libraries, bugs = reallib_seed.LIBRARIES, reallib_seed.load_bugs()
    if args.only:
        bugs = [b for b in bugs if b["id"] in args.only]
    if args.per_library:
        seen: Counter[str] = Counter()
        bugs = [b for b in bugs if (seen.update([b["library"]]) or seen[b["library"]] <= args.per_library)]
    rows = asyncio.run(run(bugs, libraries))
    judged = [r for r in rows if "status" in r]
    per_library: dict[str, Counter[str]] = {}
    for r in judged:
        per_library.setdefault(r["library"], Counter())[r["status"]] += 1
    out = {
        "bench": "truefix",
        "corpus": args.corpus or "reallib",
        "bugs": len(rows),
        "judged": len(judged),
        "fixed": sum(r["status"] == "fixed" for r in judged),
        "fixed_before_controls": sum(r["status_before_controls"] == "fixed" for r in judged),
        "changed_by_controls": [r for r in judged if r["status"] != r["status_before_controls"]],
        "per_library": {k: dict(v) for k, v in per_library.items()},
        "not_fixed": [r for r in judged if r["status"] != "fixed"],
        "errors": [r for r in rows if "error" in r],
        "goal": "every true fix judged fixed",
        "rows": rows,
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
