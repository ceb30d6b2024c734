"""A new operator's first day: the README's two commands in a fresh clone, then the operator steps.

Clones this checkout's HEAD into a temporary directory and, there: makes the venv and installs autod
(`--venv PATH` reuses an existing one instead, to stay fast), runs the README's "Test it" command
(a few unit test files; `--full`: the whole suite) and its "Run it" (`autod run` with the shipped
config as it is) until the daemon says it is ready (timed from the start), saves a file with an
unused import and times the fix the README promises (lint fails, `lint-fix` mends it, the fast unit
tests confirm: until `cycle.outcome`), makes the config file bad under it (the reload is refused;
status, pause and resume still work) and stops it with Ctrl-C (exit 0). Then the operator's steps:
a config typo in the file and one in the environment (exit 78 naming the file, line and field, or
the variable); `autod run` in an empty directory (the demo project, fixed by the offline planner);
`autod undo` (the undone fix is not made again after a save); branch delivery across a restart (one
branch); `autod quarantine clear` (the check runs again at once); `run --once` in an empty directory
(exit 2: no checks). No model, no server: the offline planner.

One JSON line per step as it ends, then one JSON document; exit 0 when every step is green.

    python bench/bench_firstday.py [--venv .venv] [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import firstday_ops as ops  # noqa: E402

Say = Callable[[str, bool, str], None]
QUICK_TESTS = "tests/unit/test_config.py tests/unit/test_config_fuzz.py tests/unit/test_rules_planner.py"


class Day:
    """The clone, its Python, and the steps run so far."""

    def __init__(self, clone: Path, python: Path, full: bool) -> None:
        self.clone, self.python, self.full = clone, python, full
        self.steps: list[dict[str, Any]] = []
        self.env = ops.environment()
        self.env["PYTHONPATH"] = str(clone)  # a reused venv imports the clone's autod, not its own
        # `. .venv/bin/activate`, as the README does: the checks' programs (ruff, python) are found there
        self.env["PATH"] = f"{python.parent}{os.pathsep}{self.env.get('PATH', '')}"

    def autod(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """`autod ARGS` from the clone's venv, in `cwd` (the clone)."""
        cmd = [str(self.python), "-m", "autod.cli.main", *args]
        return subprocess.run(cmd, cwd=cwd or self.clone, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)

    def record(self, name: str, ok: bool, detail: str, took: float) -> None:
        step = {"step": name, "ok": ok, "seconds": round(took, 1), "detail": detail}
        self.steps.append(step)
        print(json.dumps(step), flush=True)

    def step(self, name: str, fn: Callable[[], tuple[bool, str]]) -> bool:
        start = time.monotonic()
        try:
            ok, detail = fn()
        except Exception as exc:  # a step that breaks is a red step, and the day goes on
            ok, detail = False, f"{type(exc).__name__}: {str(exc)[:300]}"
        self.record(name, ok, detail, time.monotonic() - start)
        return ok

    def steps_of(self, name: str, fn: Callable[[Say], None]) -> None:
        """Several steps that share one daemon: `fn` says each as it is known, timed from the last."""
        last = [time.monotonic()]

        def say(step: str, ok: bool, detail: str) -> None:
            now = time.monotonic()
            self.record(step, ok, detail, now - last[0])
            last[0] = now

        try:
            fn(say)
        except Exception as exc:  # the step it broke in is red, and the day goes on
            say(name, False, f"{type(exc).__name__}: {str(exc)[:300]}")


def _venv(day: Day, reuse: Path | None) -> tuple[bool, str]:
    if reuse is not None:
        return day.python.exists(), f"reusing {reuse} (PYTHONPATH is the clone)"
    subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=day.clone, check=True, timeout=300)
    pip = subprocess.run([str(day.clone / ".venv/bin/pip"), "install", "-q", "-e", ".[dev]"], cwd=day.clone,
                         capture_output=True, text=True, timeout=1800)
    return pip.returncode == 0, "python3 -m venv .venv && pip install -q -e '.[dev]'" + pip.stderr[-300:]


def _tests(day: Day) -> tuple[bool, str]:
    args = [] if day.full else ["-n", "0", *QUICK_TESTS.split()]
    out = subprocess.run([str(day.python), "-m", "pytest", "-q", *args], cwd=day.clone, env=day.env,
                         capture_output=True, text=True, timeout=3600)
    return out.returncode == 0, (out.stdout.strip().splitlines() or ["no output"])[-1]


def _config_check(day: Day) -> tuple[bool, str]:
    out = day.autod("config", "check")
    lines = out.stdout.strip().splitlines()
    return out.returncode == 0 and len(lines) <= 4, f"exit {out.returncode}, {len(lines)} lines: {lines[:1]}"


def _run_it(day: Day, say: Say) -> None:
    """The README's `autod run` on the clone: ready with its checks passing, the first fix, a bad file."""
    started = time.monotonic()
    d = ops.Running(day.python, day.clone, day.env)
    try:
        ready = d.event("daemon.ready", timeout=1800)
        passed = ready.get("checks") and all(v == "passed" for v in ready["checks"].values())
        took = time.monotonic() - started
        say("run it (README): ready, its checks pass", bool(passed), f"{took:.1f} s: {ready.get('said')}")
        say("a save with an unused import is fixed (README)", *ops.unused_import_fixed(d, day.clone))
        config = day.clone / "config" / "autod.yaml"
        say("a bad file under the running daemon", *ops.bad_file_under_a_running_daemon(
            d, lambda *a: day.autod(*a), config))
    finally:
        code = d.stop()
    say("Ctrl-C stops it", code == 0, f"exit {code}")


def _typo_in_the_environment(day: Day) -> tuple[bool, str]:
    out = day.autod("config", "check", env={"AUTOD_LIMTS__MAX_CYCLES_PER_HOUR": "3"})
    return out.returncode == 78 and "AUTOD_LIMTS__" in out.stderr, out.stderr.strip()[:200]


def _empty_dir_once(day: Day, empty: Path) -> tuple[bool, str]:
    out = day.autod("run", "--once", cwd=empty)
    said = out.stderr.strip()[:160]
    return out.returncode == 2 and "no checks" in out.stderr, f"exit {out.returncode}: {said}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--venv", type=Path, help="reuse this venv (with autod's [dev] dependencies), make none")
    p.add_argument("--full", action="store_true", help="the README's test command runs the whole suite")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="autod-firstday-") as tmp:
        clone = Path(tmp) / "autod"
        python = (args.venv.resolve() if args.venv else clone / ".venv") / "bin" / "python"
        day = Day(clone, python, args.full)
        day.step("clone", lambda: (subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)],
                                                  timeout=300).returncode == 0, f"git clone {ROOT}"))
        day.step("venv", lambda: _venv(day, args.venv))
        day.step("test it (README)", lambda: _tests(day))
        day.step("config check", lambda: _config_check(day))
        day.steps_of("run it (README)", lambda say: _run_it(day, say))
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        day.step("a typo in the config file is an error naming file, line and field",
                 lambda: ops.typo_in_the_file(day.autod, clone / "config" / "autod.yaml", scratch))
        day.step("a misspelt override is an error naming the variable", lambda: _typo_in_the_environment(day))
        demo = Path(tmp) / "demo"
        demo.mkdir()
        day.steps_of("the demo", lambda say: ops.demo_and_undo(day.python, day.autod, day.env, demo, say))
        day.step("a fix on a branch, and one branch after a restart",
                 lambda: ops.one_branch(day.python, day.env, demo, Path(tmp) / "branch"))
        day.step("quarantine clear runs the check again",
                 lambda: ops.quarantine_clear(day.python, day.autod, day.env, demo, Path(tmp) / "stuck"))
        (Path(tmp) / "empty").mkdir()
        day.step("run --once in an empty directory", lambda: _empty_dir_once(day, Path(tmp) / "empty"))
    green = all(s["ok"] for s in day.steps)
    print(json.dumps({"bench": "firstday", "green": green, "full": args.full, "steps": day.steps}))
    return 0 if green else 1


if __name__ == "__main__":
    raise SystemExit(main())
