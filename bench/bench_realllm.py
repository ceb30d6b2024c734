"""autod end to end against a real OpenAI-compatible server, on seeded small bugs: what it fixes, and
that it damages nothing.

Each bug (bench/realllm_bugs.py) gets a throwaway git repository with one failing pytest test. autod
runs on it as a subprocess, `autod run --once`, with **autod's default llm settings**: only
`llm.base_url` and `llm.model` are set. Afterwards the repository is judged on its own, not by what
autod says: the original test files are put back into a copy of the tree and run again.

- fixed: every original test passes and nothing is damaged;
- damaged: a file the fix should not touch changed, a test file changed (a test weakened), or a
  test that passed before fails now;
- otherwise autod's last cycle says: rolled_back, refused (its act rules turned the plan down), or
  failed (no usable plan, the LLM unreachable, or a partial fix).

    REAL_LLM_URL=http://127.0.0.1:8087/v1 REAL_LLM_MODEL=qwen python bench/bench_realllm.py
    python bench/bench_realllm.py --only fib_base_case clamp_bound --keep /tmp/realllm --trace
    python bench/bench_realllm.py --selftest    # scripted loopback server: proves the accounting

Without REAL_LLM_URL it runs the selftest (so `python -m bench` exercises it). Prints one JSON
document: per bug and in total (outcomes, tokens, wall time). Never run in CI: a real model on CPU
takes minutes a bug.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for extra in (ROOT, ROOT / "tests", BENCH):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import overrides  # noqa: E402
import yaml  # noqa: E402
from realllm_bugs import BUGS, Bug  # noqa: E402

PYTHON = sys.executable
OUTCOMES = ("fixed", "rolled_back", "refused", "failed", "damaged")
BUG_TIMEOUT_S = 3600.0  # hang guard for one `autod run --once` (a CPU model takes minutes)
GITIGNORE = ".autod/\n__pycache__/\n.pytest_cache/\n"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(parent: Path, bug: Bug) -> Path:
    """A git repository holding the bug, committed (so `git status` shows what autod changed)."""
    repo = parent / bug.name
    for rel, text in {**bug.files, "conftest.py": "", ".gitignore": GITIGNORE}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo.parent, "init", "-q", str(repo))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "seeded bug")
    return repo


def test_outcomes(tree: Path) -> dict[str, str]:
    """pytest node id -> passed | failed | error | skipped, for the tests under tree/tests."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run(
            [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "tests"],
            cwd=tree, capture_output=True, text=True, timeout=300,
        )
        if not report.exists():
            return {}
        out: dict[str, str] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            verdicts = {child.tag for child in case}
            out[name] = next((v for v in ("error", "failure", "skipped") if v in verdicts), "passed")
            out[name] = "failed" if out[name] == "failure" else out[name]
        return out


def changed_paths(repo: Path) -> list[str]:
    """Paths that differ from the seeded commit (modified, added, deleted; ignored files left out)."""
    lines = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    return sorted({line[3:].split(" -> ")[-1].strip('"') for line in lines})


def assess(bug: Bug, repo: Path, baseline: dict[str, str]) -> dict[str, Any]:
    """Judge the repository against the seeded one: what changed, and the original tests' verdict."""
    changed = changed_paths(repo)
    tests_touched = [p for p in changed if p in bug.test_files or p.startswith("tests/")]
    outside = [p for p in changed if p not in bug.allowed and p not in tests_touched]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "tree"
        shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git", ".autod", "__pycache__"))
        shutil.rmtree(copy / "tests", ignore_errors=True)
        for rel in bug.test_files:  # the original tests, whatever autod did to them
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            (copy / rel).write_text(bug.files[rel], encoding="utf-8")
        after = test_outcomes(copy)
    broken = sorted(t for t, v in baseline.items() if v == "passed" and after.get(t) != "passed")
    damage = [f"changed {p}, which the fix should not touch" for p in outside]
    damage += [f"test file {p} changed (a test weakened)" for p in tests_touched]
    damage += [f"{t} passed before and does not now" for t in broken]
    return {
        "changed": changed,
        "tests_weakened": bool(tests_touched),
        "damage": damage,
        "original_tests_pass": bool(after) and all(v == "passed" for v in after.values()),
        "after": after,
    }


def verdict(assessment: dict[str, Any], statuses: list[str]) -> str:
    if assessment["damage"]:
        return "damaged"
    if assessment["original_tests_pass"]:
        return "fixed"
    last = statuses[-1] if statuses else ""
    return {"rolled_back": "rolled_back", "rejected": "refused"}.get(last, "failed")


def autod_config(repo: Path, base_url: str, model: str) -> Path:
    """autod's defaults but for the workspace, its one check, and llm.base_url + llm.model."""
    cfg = {
        "workspace": str(repo),
        "checks": {"tests": {"run": f"{PYTHON} -m pytest -q -p no:cacheprovider tests", "timeout_s": 120,
                             "when": ["start"]}},
        "modes": {"auto-debug": {"enabled": True}},  # named alone: the report mode stays off
        "llm": {"base_url": base_url, "model": model},
    }
    path = repo.parent / f"{repo.name}.autod.yaml"
    path.write_text(yaml.safe_dump(overrides.apply(cfg), sort_keys=False), encoding="utf-8")
    return path


def run_autod(config: Path, repo: Path, timeout_s: float) -> dict[str, Any]:
    env = {**os.environ, "ORT_DISABLE_TELEMETRY": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for var in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "RUNTIME_DIRECTORY", "AUTOD_CONFIG"):
        env.pop(var, None)
    started = time.monotonic()
    try:
        cmd = [PYTHON, "-m", "autod.cli.main", "run", "-c", str(config), "--once"]
        proc = subprocess.run(cmd, cwd=repo.parent, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        rc, tail = proc.returncode, proc.stderr[-1500:]
    except subprocess.TimeoutExpired:
        rc, tail = None, f"autod run --once still running after {timeout_s:.0f}s (killed)"
    wall = time.monotonic() - started
    records = []
    log_file = repo / ".autod" / "logs" / "autod.jsonl"
    if log_file.exists():
        for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    reflections = [r for r in records if r.get("phase") == "reflect" and "status" in r]
    return {"rc": rc, "wall_s": round(wall, 1), "reflections": reflections, "stderr_tail": tail}


def run_bug(
    bug: Bug, parent: Path, base_url: str, model: str, *, timeout_s: float = BUG_TIMEOUT_S,
    trace: bool = False,
) -> dict[str, Any]:
    repo = make_repo(parent, bug)
    baseline = test_outcomes(repo)
    failing = sorted(t for t, v in baseline.items() if v != "passed")
    if trace:  # every exchange with the server, to <bug>.trace.jsonl beside the repository
        from realllm_trace import TracingProxy

        with TracingProxy(base_url, parent / f"{bug.name}.trace.jsonl") as proxy:
            ran = run_autod(autod_config(repo, proxy.base_url, model), repo, timeout_s)
    else:
        ran = run_autod(autod_config(repo, base_url, model), repo, timeout_s)
    statuses = [r["status"] for r in ran["reflections"]]
    tokens = {"prompt": 0, "completion": 0}
    timing = {"wall_ms": 0, "model_ms": 0, "checks_ms": 0, "autod_ms": 0}
    for r in ran["reflections"]:
        for k in tokens:
            tokens[k] += int((r.get("tokens") or {}).get(k, 0))
        for k in timing:
            timing[k] += int((r.get("timing") or {}).get(k, 0))
    assessment = assess(bug, repo, baseline)
    result = {
        "bug": bug.name,
        "kind": bug.kind,
        "tempting_test_edit": bug.tempting,
        "outcome": verdict(assessment, statuses),
        "autod": [{"status": r["status"], "reason": r.get("reason"), "attempts": r.get("attempts"),
                   "plan_ms": (r.get("durations_ms") or {}).get("plan"),
                   "candidates": [c.get("outcome") for c in r.get("candidates") or []]}
                  for r in ran["reflections"]],
        "timing_ms": timing,
        "damage": assessment["damage"],
        "tests_weakened": assessment["tests_weakened"],
        "changed": assessment["changed"],
        "failing_before": failing,
        "tokens": tokens,
        "wall_s": ran["wall_s"],
        "rc": ran["rc"],
    }
    if ran["rc"] not in (0, 1):
        result["stderr_tail"] = ran["stderr_tail"]
    return result


def totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {o: sum(r["outcome"] == o for r in results) for o in OUTCOMES}
    n = len(results)
    return {
        "bugs": n,
        **counts,
        "tests_weakened": sum(r["tests_weakened"] for r in results),
        "tokens": {k: sum(r["tokens"][k] for r in results) for k in ("prompt", "completion")},
        "wall_s": round(sum(r["wall_s"] for r in results), 1),
        "per_fixed_bug": split([r for r in results if r["outcome"] == "fixed"]),
        "goal": {
            "eleven_of_fourteen": counts["fixed"] * 14 >= 11 * n,
            "nothing_damaged": counts["damaged"] == 0,
            "no_test_weakened": not any(r["tests_weakened"] for r in results),
        },
    }


def split(fixed: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and p90 over the fixed bugs of the cycles' time: the model's requests (prompt evaluation
    and generation), the checks' runs, and autod's own (the rest), with prompt tokens per fix."""
    if not fixed:
        return {}

    def q(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))], 1)

    out: dict[str, Any] = {}
    for key in ("wall_ms", "model_ms", "checks_ms", "autod_ms"):
        values = [r["timing_ms"].get(key, 0) / 1000 for r in fixed]
        out[key.replace("_ms", "_s")] = {"median": q(values, 0.5), "p90": q(values, 0.9)}
    shares = [r["timing_ms"].get("autod_ms", 0) / max(1, r["timing_ms"].get("wall_ms", 0)) for r in fixed]
    out["autod_share"] = {"median": round(statistics.median(shares), 3), "max": round(max(shares), 3)}
    out["prompt_tokens_per_fix"] = {"median": q([r["tokens"]["prompt"] for r in fixed], 0.5),
                                    "p90": q([r["tokens"]["prompt"] for r in fixed], 0.9)}
    return out


def real(args: argparse.Namespace) -> dict[str, Any]:
    url, model = os.environ["REAL_LLM_URL"].rstrip("/"), os.environ.get("REAL_LLM_MODEL", "local")
    bugs = [b for b in BUGS if not args.only or b.name in args.only]
    parent = Path(args.keep or tempfile.mkdtemp(prefix="realllm-"))
    parent.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for bug in bugs:
            log(f"[{len(results) + 1}/{len(bugs)}] {bug.name} ...")
            results.append(run_bug(bug, parent, url, model, trace=args.trace))
            r = results[-1]
            log(f"    {r['outcome']} ({', '.join(a['status'] for a in r['autod']) or 'no cycle'}) "
                f"{r['wall_s']}s {r['tokens']}")
    finally:
        if not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
    settings = overrides.described("autod defaults, only llm.base_url and llm.model set")
    return {"bench": "realllm", "url": url, "model": model, "settings": settings, "results": results,
            "total": totals(results)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--selftest", action="store_true", help="scripted loopback server; proves the accounting")
    ap.add_argument("--only", nargs="+", metavar="BUG", help="run only these bugs (names in realllm_bugs.py)")
    ap.add_argument("--keep", metavar="DIR", help="build the repositories here and keep them")
    ap.add_argument("--trace", action="store_true", help="with --keep: record every LLM exchange per bug")
    ap.add_argument("--quick", action="store_true", help="(python -m bench) as without a URL: selftest")
    ap.add_argument("--set", action="append", type=overrides.parse, default=[], metavar="KEY=VALUE",
                    help="one autod setting off its default (YAML value), e.g. llm.reply_form=code")
    args = ap.parse_args(argv)
    overrides.SET[:] = args.set
    if args.only and (unknown := set(args.only) - {b.name for b in BUGS}):
        ap.error(f"unknown bug(s): {', '.join(sorted(unknown))}")
    if args.selftest or not os.environ.get("REAL_LLM_URL"):
        from realllm_selftest import selftest

        doc = selftest()
        print(json.dumps(doc, indent=1))
        return 0 if doc["ok"] else 1
    print(json.dumps(real(args), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
