"""Benchmark: what verifying a candidate away from the working tree costs, next to the check itself.

A repository of 5,000 files (Python modules in packages, plus data files and a venv-like directory
bound back rather than copied) with a pytest suite over a slice of it. Measured in the same run,
interleaved:
  check           the check on the working tree, under bwrap (what verification costs anyway)
  stage           autod's mirror brought in step and a candidate's file written (autod.isolation):
                  the first sync of a process (a full copy) and the steady state (one file changed)
  check_mirror    the same check on the mirror, mounted at the workspace's path
  cp_a            `cp -a` of the tree (what a fresh copy per candidate would cost)
  git_worktree    `git worktree add` + removal (a clean checkout per candidate; no uncommitted work)
Goal: the steady-state stage costs < 10 % of the check's own time. Prints one JSON document.

    python bench/bench_isolation.py            # 5,000 files, 15 rounds
    python bench/bench_isolation.py --quick    # 5,000 files, 4 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autod.checks import sandbox  # noqa: E402
from autod.config.settings import Settings  # noqa: E402
from autod.isolation import Isolation  # noqa: E402

GOAL = 0.10
FILES = 5000
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x", "PATH": "/usr/bin:/bin"}


def make_repo(root: Path, files: int) -> Path:
    ws = root / "ws"
    pkgs = 50
    per_pkg = (files - 60) // pkgs
    for p in range(pkgs):
        pkg = ws / "src" / f"pkg{p}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for i in range(per_pkg - 1):
            body = "".join(f"def f{j}(x):\n    return x + {j}\n\n\n" for j in range(20))
            (pkg / f"mod{i}.py").write_text(f'"""Module {p}.{i}."""\n\n{body}')
    (ws / "data").mkdir()
    for i in range(files - pkgs * per_pkg - 10):
        (ws / "data" / f"row{i}.csv").write_text("a,b,c\n" * 20)
    # a venv-like directory: bound back from the tree, never copied
    venv = ws / ".venv" / "lib"
    venv.mkdir(parents=True)
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for i in range(200):
        (venv / f"dep{i}.py").write_text("x = 1\n" * 50)
    tests = ws / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
    )
    for t in range(8):
        imports = "\n".join(f"from pkg{p} import mod{t} as m{p}" for p in range(pkgs))
        checks = "\n".join(f"    assert m{p}.f{t}(1) == {1 + t}" for p in range(pkgs))
        (tests / f"test_part{t}.py").write_text(f"{imports}\n\n\ndef test_part():\n{checks}\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".gitignore").write_text(".venv/\n.autod/\n__pycache__/\n")
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(ws), "commit", "-qm", "init"], check=True, env=GIT_ENV)
    return ws


def ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


async def rounds(ws: Path, n: int) -> dict[str, Any]:
    run = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    settings = Settings(workspace=ws, state_dir=ws.parent / "state", checks={"tests": {"run": run}})
    iso = Isolation(settings)
    from autod.checks.run import run_check

    ways = ("check", "stage", "check_mirror", "cp_a", "git_worktree")
    times: dict[str, list[float]] = {k: [] for k in ways}
    t0 = time.perf_counter()
    await iso.stage({})
    first_sync = ms(t0)
    first_stats = iso.last_sync
    target = ws / "src" / "pkg0" / "mod0.py"
    for i in range(n):
        t0 = time.perf_counter()
        tree = await run_check("tests", settings.checks["tests"], ws, settings=settings)
        times["check"].append(ms(t0))
        assert tree.ok, tree.output[-2000:]
        target.write_text(target.read_text() + f"\n# edit {i}\n")  # the operator keeps working
        t0 = time.perf_counter()
        await iso.stage({"src/pkg1/mod1.py": (ws / "src/pkg1/mod1.py").read_bytes() + b"\n# candidate\n"})
        times["stage"].append(ms(t0))
        t0 = time.perf_counter()
        mirrored = await iso.run_check("tests")
        times["check_mirror"].append(ms(t0))
        assert mirrored.ok, mirrored.output[-2000:]
        with tempfile.TemporaryDirectory(dir=ws.parent) as tmp:
            t0 = time.perf_counter()
            subprocess.run(["cp", "-a", str(ws), str(Path(tmp) / "copy")], check=True)
            times["cp_a"].append(ms(t0))
        wt = ws.parent / f"wt{i}"
        t0 = time.perf_counter()
        subprocess.run(["git", "-C", str(ws), "worktree", "add", "-q", "--detach", str(wt)], check=True,
                       env=GIT_ENV)
        subprocess.run(["git", "-C", str(ws), "worktree", "remove", "--force", str(wt)], check=True,
                       env=GIT_ENV)
        times["git_worktree"].append(ms(t0))
    out: dict[str, Any] = {
        k: {"p50_ms": pct(v, 50), "p90_ms": pct(v, 90), "mean_ms": round(statistics.fmean(v), 1)}
        for k, v in times.items()
    }
    check_p50 = out["check"]["p50_ms"]
    out["first_sync_ms"] = first_sync
    out["first_sync"] = {"files": first_stats.files, "copied": first_stats.copied,
                         "mb_copied": round(first_stats.bytes_copied / 2**20, 1),
                         "bound_back": first_stats.bind_back} if first_stats else None
    out["stage_share_of_check"] = round(out["stage"]["p50_ms"] / check_p50, 4)
    out["first_sync_share_of_check"] = round(first_sync / check_p50, 4)
    out["cp_a_share_of_check"] = round(out["cp_a"]["p50_ms"] / check_p50, 4)
    out["goal_met"] = out["stage_share_of_check"] < GOAL
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 rounds instead of 15")
    ap.add_argument("--files", type=int, default=FILES)
    args = ap.parse_args(argv)
    verdict = sandbox.probe()
    if not verdict.works:
        print(json.dumps({"benchmark": "isolation", "skipped": True, "why": verdict.why}))
        return 1
    with tempfile.TemporaryDirectory(prefix="autod-bench-iso-") as tmp:
        ws = make_repo(Path(tmp), args.files)
        files = sum(1 for p in ws.rglob("*") if p.is_file() and ".git" not in p.parts)
        result = asyncio.run(rounds(ws, 4 if args.quick else 15))
        shutil.rmtree(ws.parent / "state", ignore_errors=True)
    print(json.dumps({"benchmark": "isolation", "files": files, "goal_share": GOAL, **result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
