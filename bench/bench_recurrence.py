"""A failure autod fixed before comes back: what the second fix costs (model calls, wall time).

For each seeded small bug (bench/realllm_bugs.py, the bugs bench_realllm.py gives autod) and, with
`--reallib`, bugs seeded in real libraries (bench/reallib_bugs.json, judged as reallib_e2e.py judges
them), in a throwaway git repository: `autod run --once` fixes it (the first fix); the fix is
committed, as a user accepts it, then reverted with `git revert` (the bug is back, as a bad merge
would bring it); `autod run --once` again on the same state directory, so with the same memory (the
second fix). Each run
talks to the server through a recording proxy (bench/realllm_trace.py): its model calls are the
requests the proxy saw. Each repository is judged on its own after each fix, as bench_realllm.py
judges it (the original tests put back and run; damage named).

    python bench/bench_recurrence.py --llm http://127.0.0.1:8087/v1 --model qwen
    python bench/bench_recurrence.py --llm URL --model NAME --only fib_base_case --keep /tmp/recur
    python bench/bench_recurrence.py --llm URL --model NAME --reallib      # and three real-library bugs
    python bench/bench_recurrence.py --selftest     # the scripted loopback server, no model
    python bench/bench_recurrence.py --selftest --no-small --reallib parse-01

Settings: autod's defaults but `llm.base_url`, `llm.model` and `limits.min_interval_s: 0` (the second
run starts seconds after the first; the default five-second pause between cycles would only add wait).
Prints one JSON document: per bug (first and second fix: outcome, model calls, wall time, whether the
second was a replay from memory) and in total, with the goal: 0 model calls for >= 80 % of second
fixes, their median wall time <= 20 % of the first's, nothing damaged.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
for extra in (BENCH.parent, BENCH.parent / "tests", BENCH):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import overrides  # noqa: E402
import yaml  # noqa: E402
from bench_realllm import (  # noqa: E402
    BUGS,
    PYTHON,
    assess,
    git,
    log,
    make_repo,
    run_autod,
    test_outcomes,
    verdict,
)
from realllm_bugs import Bug  # noqa: E402
from realllm_trace import TracingProxy  # noqa: E402

RUN_TIMEOUT_S = 3600.0  # hang guard for one `autod run --once` (a CPU model takes minutes)
SELFTEST_BUGS = ("fib_base_case", "clamp_bound", "sum_to_off_by_one")


def config(repo: Path, base_url: str, model: str, check: dict[str, Any] | None = None) -> Path:
    """autod's defaults but for the workspace, its one check, the server, and no pause between cycles."""
    cfg = {
        "workspace": str(repo),
        "checks": {"tests": check or {"run": f"{PYTHON} -m pytest -q -p no:cacheprovider tests",
                                      "timeout_s": 120}},
        "modes": {"auto-debug": {"enabled": True}},
        "llm": {"base_url": base_url, "model": model},
        "limits": {"min_interval_s": 0},
    }
    cfg["checks"]["tests"]["when"] = ["start"]
    path = repo.parent / f"{repo.name}.autod.yaml"
    path.write_text(yaml.safe_dump(overrides.apply(cfg), sort_keys=False), encoding="utf-8")
    return path


@dataclass
class Case:
    """One bug in its repository: how autod is configured on it and how the tree is judged."""

    name: str
    kind: str
    repo: Path
    check: dict[str, Any] | None
    judge: Callable[[list[str]], dict[str, Any]]  # the cycles' statuses -> outcome, damage, changed
    tests: Callable[[], dict[str, str]]  # test id -> verdict, the suite as it stands
    fix: dict[str, str]  # the right fix as a plan's edit (what the selftest's scripted server answers)


def small_case(bug: Bug, parent: Path) -> Case:
    repo = make_repo(parent, bug)
    baseline = test_outcomes(repo)

    def judge(statuses: list[str]) -> dict[str, Any]:
        a = assess(bug, repo, baseline)
        return {"outcome": verdict(a, statuses), "damage": a["damage"], "changed": a["changed"]}

    path, search, replace = bug.fix
    fix = {"path": path, "search": search, "replace": replace}
    return Case(bug.name, bug.kind, repo, None, judge, lambda: test_outcomes(repo), fix)


def reallib_case(bug: dict[str, Any], parent: Path) -> Case:
    """A bug seeded in a real library (bench/reallib_bugs.json), judged as reallib_e2e.py judges it."""
    import reallib_e2e
    from bench_reallib import check_for
    from reallib_seed import LIBRARIES, extract

    lib = LIBRARIES[bug["library"]]
    pristine = extract(lib, parent / f"src-{lib.name}")
    repo = reallib_e2e.make_repo(parent, pristine, bug)
    before = reallib_e2e.outcomes(repo, lib)

    def judge(statuses: list[str]) -> dict[str, Any]:
        a = reallib_e2e.assess(repo, pristine, bug, before)
        return {"outcome": verdict(a, statuses), "damage": a["damage"], "changed": a["changed"]}

    # the right fix: the seeded lines put back, a line of context each side (a unique search text)
    lines = (repo / bug["file"]).read_text(encoding="utf-8").splitlines(keepends=True)
    at, n = bug["line"] - 1, len(bug["new"])
    before_, after_ = lines[max(0, at - 1) : at], lines[at + n : at + n + 1]
    fix = {"path": bug["file"], "search": "".join([*before_, *bug["new"], *after_]),
           "replace": "".join([*before_, *bug["old"], *after_])}
    return Case(bug["id"], f"{bug['library']}: {bug.get('note') or bug.get('operator')}", repo,
                check_for(lib), judge, lambda: reallib_e2e.outcomes(repo, lib), fix)


def model_calls(trace: Path) -> int:
    """The chat requests the proxy forwarded (a probe of the server's models is no model call)."""
    if not trace.exists():
        return 0
    lines = trace.read_text(encoding="utf-8", errors="replace").splitlines()
    return sum(1 for line in lines if json.loads(line).get("method") == "POST")


def one_fix(case: Case, url: str, model: str, name: str, timeout_s: float) -> dict[str, Any]:
    trace = case.repo.parent / f"{case.repo.name}.{name}.trace.jsonl"
    with TracingProxy(url, trace) as proxy:
        ran = run_autod(config(case.repo, proxy.base_url, model, case.check), case.repo, timeout_s)
    seen = _SEEN.setdefault(str(case.repo), set())  # the log is appended to: the earlier run's cycles
    mine = [r for r in ran["reflections"] if r.get("cycle_id") not in seen]
    seen.update(r.get("cycle_id") for r in ran["reflections"])
    judged = case.judge([r["status"] for r in mine])
    candidates = [c for r in mine for c in r.get("candidates") or []]
    return {
        "outcome": judged["outcome"],
        "statuses": [r["status"] for r in mine],
        "model_calls": model_calls(trace),
        "wall_s": ran["wall_s"],
        "cycle_wall_s": round(sum((r.get("timing") or {}).get("wall_ms", 0) for r in mine) / 1000, 1),
        "tokens": sum(sum((r.get("tokens") or {}).values()) for r in mine),
        "candidates": [(c.get("view"), c.get("outcome")) for c in candidates],
        "replayed": any(c.get("replay_of") and c.get("outcome") == "fixed" for c in candidates),
        "replays_failed": sum(1 for c in candidates if c.get("replay_of") and c.get("outcome") != "fixed"),
        "damage": judged["damage"],
        "changed": judged["changed"],
    }


_SEEN: dict[str, set[Any]] = {}  # per repository, the cycles its earlier runs logged


def run_case(case: Case, url: str, model: str, *, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """Fix, commit the fix, revert it (the bug is back), fix again on the same state directory."""
    out: dict[str, Any] = {"bug": case.name, "kind": case.kind}
    out["first"] = first = one_fix(case, url, model, "first", timeout_s)
    if first["outcome"] != "fixed":
        return out
    who = ("-c", "user.name=bench", "-c", "user.email=bench@example.com")
    git(case.repo, "add", "-A")
    git(case.repo, *who, "commit", "-qm", "autod's fix", "--no-verify")
    git(case.repo, *who, "revert", "--no-edit", "HEAD")
    out["bug_back"] = any(v != "passed" for v in case.tests().values())
    out["second"] = one_fix(case, url, model, "second", timeout_s)
    return out


def totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [r["first"] for r in results]
    seconds = [r["second"] for r in results if "second" in r]
    fixed_again = [s for s in seconds if s["outcome"] == "fixed"]
    free = [s for s in seconds if s["outcome"] == "fixed" and s["model_calls"] == 0]
    ratios = [r["second"]["cycle_wall_s"] / max(0.1, r["first"]["cycle_wall_s"])
              for r in results if "second" in r and r["second"]["outcome"] == "fixed"]
    damaged = sum(f["outcome"] == "damaged" for f in firsts + seconds)
    share = len(free) / len(seconds) if seconds else 0.0
    median_ratio = round(statistics.median(ratios), 3) if ratios else None
    return {
        "bugs": len(results),
        "first_fixed": sum(f["outcome"] == "fixed" for f in firsts),
        "recurrences": len(seconds),
        "second_fixed": len(fixed_again),
        "second_zero_model_calls": len(free),
        "second_replayed": sum(s["replayed"] for s in seconds),
        "replays_failed": sum(s["replays_failed"] for s in seconds),
        "model_calls": {"first": sum(f["model_calls"] for f in firsts),
                        "second": sum(s["model_calls"] for s in seconds)},
        "median_second_to_first_wall": median_ratio,
        "damaged": damaged,
        "goal": {
            "zero_calls_share": round(share, 3),
            "zero_calls_80pct": share >= 0.8,
            "wall_20pct": median_ratio is not None and median_ratio <= 0.2,
            "nothing_damaged": damaged == 0,
        },
    }


def run(make: list[Callable[[Path], Case]], url: str, model: str, keep: str | None) -> list[dict[str, Any]]:
    parent = Path(keep or tempfile.mkdtemp(prefix="recurrence-"))
    parent.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    try:
        for i, new_case in enumerate(make, 1):
            case = new_case(parent)
            log(f"[{i}/{len(make)}] {case.name} ...")
            results.append(run_case(case, url, model))
            r = results[-1]
            second = r.get("second") or {}
            log(f"    first {r['first']['outcome']} ({r['first']['model_calls']} calls, "
                f"{r['first']['cycle_wall_s']}s); second {second.get('outcome', '-')} "
                f"({second.get('model_calls', '-')} calls, {second.get('cycle_wall_s', '-')}s)")
    finally:
        if not keep:
            shutil.rmtree(parent, ignore_errors=True)
    return results


def cases(small: list[str] | None, reallib: list[str] | None) -> list[Callable[[Path], Case]]:
    """The small bugs (all when `small` is None) and the real-library bugs named in `reallib`."""
    from reallib_seed import load_bugs

    out: list[Callable[[Path], Case]] = [
        functools.partial(small_case, b) for b in BUGS if small is None or b.name in small]
    by_id = {b["id"]: b for b in load_bugs()} if reallib else {}
    out += [functools.partial(reallib_case, by_id[i]) for i in reallib or []]
    return out


def selftest(only: list[str] | None, reallib: list[str] | None, keep: str | None) -> dict[str, Any]:
    """The scripted loopback server answers every request with the bug's right fix: the first fix asks
    it, the second must not (a replay); nothing damaged."""
    from llmserver import ScriptedLLM

    results = []
    for make in cases(only, reallib):
        with ScriptedLLM() as llm:
            def scripted(parent: Path, make: Callable[[Path], Case] = make, llm: Any = llm) -> Case:
                case = make(parent)
                llm.set_default({"plan": {"summary": "selftest fix", "verify": [], "report": None,
                                          "edits": [case.fix]}})
                return case

            results += run([scripted], llm.base_url, "scripted", keep)
    total = totals(results)
    ok = (total["first_fixed"] == len(results) and total["second_zero_model_calls"] == len(results)
          and total["damaged"] == 0 and all(r.get("bug_back") for r in results))
    return {"bench": "recurrence", "selftest": True, "results": results, "total": total, "ok": ok}


def reallib_ids(given: list[str] | None) -> list[str] | None:
    """`--reallib` ids as given; none given: the first bug of each of three libraries (bench_reallib's
    quick set)."""
    if given is None or given:
        return given
    from reallib_seed import load_bugs

    bugs = load_bugs()
    libs = list(dict.fromkeys(b["library"] for b in bugs))[:3]
    return [next(b["id"] for b in bugs if b["library"] == lib) for lib in libs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", metavar="URL", help="an OpenAI-compatible base URL ending in /v1")
    ap.add_argument("--model", default="local", help="the model name the server serves")
    ap.add_argument("--selftest", action="store_true", help="the scripted loopback server, no model")
    ap.add_argument("--quick", action="store_true", help="(python -m bench) --selftest on one bug")
    ap.add_argument("--only", nargs="+", metavar="BUG", help="run only these bugs (names in realllm_bugs.py)")
    ap.add_argument("--no-small", action="store_true", help="none of the small bugs (with --reallib)")
    ap.add_argument("--reallib", nargs="*", metavar="ID",
                    help="also these real-library bugs (ids in reallib_bugs.json; none: one of each of "
                         "three libraries); their sdists are fetched once as bench_reallib.py does")
    ap.add_argument("--keep", metavar="DIR", help="build the repositories (and traces) here and keep them")
    ap.add_argument("--set", action="append", type=overrides.parse, default=[], metavar="KEY=VALUE",
                    help="one autod setting off its default (YAML value), e.g. llm.reply_form=code")
    args = ap.parse_args(argv)
    overrides.SET[:] = args.set
    if args.only and (unknown := set(args.only) - {b.name for b in BUGS}):
        ap.error(f"unknown bug(s): {', '.join(sorted(unknown))}")
    reallib = reallib_ids(args.reallib)
    small = [] if args.no_small else args.only
    if args.selftest or args.quick or not args.llm:
        chosen = small if small is not None else list(SELFTEST_BUGS[:1] if args.quick else SELFTEST_BUGS)
        doc = selftest(chosen, reallib, args.keep)
        print(json.dumps(doc, indent=1))
        return 0 if doc["ok"] else 1
    results = run(cases(small, reallib), args.llm.rstrip("/"), args.model, args.keep)
    settings = overrides.described("autod defaults; llm.base_url, llm.model, limits.min_interval_s=0 set")
    print(json.dumps({"bench": "recurrence", "url": args.llm, "model": args.model, "settings": settings,
                      "results": results, "total": totals(results)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
