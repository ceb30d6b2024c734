"""What a check's `focus` saves: verification time of real cycles on real test suites.

For seeded bugs in two real libraries (bench/localize_bugs.py, sdists fetched with pip), the check is
the library's whole suite (`python -m pytest -q TESTS`); its failing run leaves pytest's last-failed
cache as an operator's check would. A real Cycle (real act, journal, checks) then applies a scripted
plan through DebugMode: a wrong fix (the bug stays) and the right fix, each with and without
`focus: python -m pytest --lf -x -q TESTS`. The figure is the act phase (apply + verify + keep or
roll back), median over the bugs.

    python bench/bench_focus.py            # 8 bugs
    python bench/bench_focus.py --quick    # 4 bugs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import yaml  # noqa: E402
from bench_localize import commit_all, extract, fetch, log  # noqa: E402
from localize_bugs import BUGS, LIBRARIES  # noqa: E402

from autod.checks.run import run_check  # noqa: E402
from autod.checks.source import failure_event  # noqa: E402
from autod.config.settings import load_config  # noqa: E402
from autod.cycle.limits import Gate  # noqa: E402
from autod.cycle.phases import Cycle, CycleDeps  # noqa: E402
from autod.modes import ModeEnv  # noqa: E402
from autod.modes.debug import DebugMode  # noqa: E402
from autod.ownwrites import OwnWrites  # noqa: E402
from autod.plan import Edit, Plan  # noqa: E402
from autod.planner import PlanResult, TokenUsage  # noqa: E402
from autod.stores.state import State  # noqa: E402

PICK = [
    "t-tail-off-by-one",
    "t-valmap-attribute",
    "t-compose-repr",
    "t-juxt-tuple",
    "b-size-bounds",
    "b-clamp-swap",
    "b-lri-evict-off",
    "b-omd-getlist",
]


class OnePlan:
    def __init__(self, plan: Plan) -> None:
        self.plan_ = plan

    async def plan(self, request: Any) -> PlanResult:
        return PlanResult(self.plan_, TokenUsage(0, 0))


async def cycle(repo: Path, state_dir: Path, check: dict[str, Any], event: Any, plan: Plan) -> dict[str, Any]:
    cfg = {
        "workspace": str(repo),
        "state_dir": str(state_dir),
        "checks": {"tests": check},
        "limits": {"min_interval_s": 0},
        "modes": {"auto-debug": {"max_attempts_per_cycle": 1}, "auto-plan": {"enabled": False}},
    }
    path = state_dir.parent / f"{state_dir.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    settings = load_config(path)
    state = State(settings.state_path / "state.db")

    async def runner(name: str, *, run: str | None = None, **extra: Any) -> Any:
        c = settings.checks[name]
        return await run_check(
            name, c.model_copy(update={"run": run}) if run else c, settings.workspace, **extra
        )

    env = ModeEnv(settings=settings, state=state, memory=None, run_check=runner)
    deps = CycleDeps(
        env=env,
        gate=Gate(settings.limits, state, None),
        planner=OnePlan(plan),
        planner_name="scripted",
        own_writes=OwnWrites(),
    )
    try:
        r = await Cycle(deps, DebugMode(), event).run()
    finally:
        state.close()
    return {
        "status": r.status,
        "act_ms": r.durations_ms.get("act", 0),
        "checks": [(c["name"], c["exit_code"], c["duration_ms"]) for c in r.checks],
    }


async def measure(work: Path, pristine: Path, bug: tuple[str, ...], tests: str) -> dict[str, Any]:
    _, bid, rel, old, new, _ = bug
    repo = work / bid
    shutil.copytree(pristine, repo, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
    target = repo / rel
    target.write_text(target.read_text().replace(old, new))
    commit_all(repo, "import")
    full = f"{sys.executable} -m pytest -q {tests}"
    focus = f"{sys.executable} -m pytest --lf -x -q {tests}"
    base = {"run": full, "timeout_s": 300}
    from autod.config.settings import CheckConfig

    buggy = target.read_text()
    last = [ln for ln in new.splitlines() if ln.strip()][-1]
    wrong = Plan(
        summary="a fix that is not one", edits=[Edit(path=rel, search=last, replace=last + "  # tried")]
    )
    right = Plan(summary="the fix", edits=[Edit(path=rel, search=new, replace=old)])
    row: dict[str, Any] = {"bug": bid}
    for label, plan in (("wrong", wrong), ("right", right)):
        for with_focus in (False, True):
            # each variant starts where a daemon would: the bug in place, the check just failed (which
            # also leaves pytest's last-failed cache, as the operator's own check run does)
            target.write_text(buggy)
            failing = await run_check("tests", CheckConfig(**base), repo)
            assert not failing.ok, f"{bid}: the suite does not catch the bug"
            row["full_check_ms"] = failing.duration_ms
            check = {**base, "focus": focus} if with_focus else base
            state = work / f"{bid}-{label}-{int(with_focus)}"
            row[f"{label}_{'focus' if with_focus else 'plain'}"] = await cycle(
                repo, state, check, failure_event(failing), plan
            )
    return row


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    picks = PICK[::2] if args.quick else PICK
    bugs = [b for b in BUGS if b[1] in picks]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-focus-") as tmp:
        work = Path(tmp)
        pristine = {lib: extract(fetch(n, v), work / f"src-{lib}") for lib, (n, v, _) in LIBRARIES.items()}
        for bug in bugs:
            log(f"{bug[1]} ...")
            rows.append(await measure(work, pristine[bug[0]], bug, LIBRARIES[bug[0]][2]))
    summary: dict[str, Any] = {}
    for key in ("wrong_plain", "wrong_focus", "right_plain", "right_focus"):
        ms = [r[key]["act_ms"] for r in rows]
        summary[key] = {
            "act_ms_median": statistics.median(ms),
            "act_ms_total": sum(ms),
            "statuses": sorted({r[key]["status"] for r in rows}),
        }
    saving = 1 - summary["wrong_focus"]["act_ms_total"] / max(1, summary["wrong_plain"]["act_ms_total"])
    extra = summary["right_focus"]["act_ms_total"] / max(1, summary["right_plain"]["act_ms_total"]) - 1
    return {
        "bench": "focus",
        "libraries": {k: f"{n}=={v}" for k, (n, v, _) in LIBRARIES.items()},
        "bugs": len(rows),
        "summary": summary,
        "wrong_fix_time_saved": round(saving, 3),
        "right_fix_time_added": round(extra, 3),
        "per_bug": rows,
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 bugs")
    print(json.dumps(asyncio.run(main_async(ap.parse_args())), indent=1))


if __name__ == "__main__":
    main()
