"""A new operator's first day: the README's two commands in a fresh clone, then the operator steps.

Clones this checkout's HEAD into a temporary directory and, there: makes the venv and installs autod
(`--venv PATH` reuses an existing one instead, to stay fast), runs the README's "Test it" command
(a few unit test files; `--full`: the whole suite), `autod config check`, the README's "Run it" as
`autod run --once` (its `tests` check narrowed to those files unless `--full`), a misspelt
environment override (exit 78), a running daemon whose config file goes bad under it (`status`,
`pause` and `resume` still work, Ctrl-C exits 0), and `run --once` in an empty directory (exit 2,
saying it has no checks). One line per step, then one JSON document; exit 0 when every step is green.

    python bench/bench_firstday.py [--venv .venv] [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUICK_TESTS = "tests/unit/test_config.py tests/unit/test_config_fuzz.py tests/unit/test_rules_planner.py"


class Day:
    """The clone, its Python, and the steps run so far."""

    def __init__(self, clone: Path, python: Path, full: bool) -> None:
        self.clone, self.python, self.full = clone, python, full
        self.steps: list[dict[str, Any]] = []
        inherited = os.environ.items()
        self.env = {k: v for k, v in inherited if not k.startswith(("AUTOD_", "NOTIFY_", "WATCHDOG_"))}
        self.env.pop("RUNTIME_DIRECTORY", None)
        self.env["PYTHONPATH"] = str(clone)  # a reused venv imports the clone's autod, not its own
        # `. .venv/bin/activate`, as the README does: the checks' programs (ruff, python) are found there
        self.env["PATH"] = f"{python.parent}{os.pathsep}{self.env.get('PATH', '')}"
        if not full:  # the shipped config's `tests` check, narrowed to a few files
            self.env["AUTOD_CHECKS__TESTS__RUN"] = f"python -m pytest -q -x -p no:cacheprovider {QUICK_TESTS}"

    def autod(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
              timeout: float = 600, plain: bool = False) -> subprocess.CompletedProcess[str]:
        """`autod ARGS` from the clone's venv; `plain`: without the narrowed `tests` check."""
        cmd = [str(self.python), "-m", "autod.cli.main", *args]
        base = {k: v for k, v in self.env.items() if not (plain and k.startswith("AUTOD_"))}
        return subprocess.run(cmd, cwd=cwd or self.clone, env={**base, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)

    def step(self, name: str, fn: Callable[[], tuple[bool, str]]) -> bool:
        start = time.monotonic()
        try:
            ok, detail = fn()
        except Exception as exc:  # a step that breaks is a red step, and the day goes on
            ok, detail = False, f"{type(exc).__name__}: {str(exc)[:300]}"
        took = round(time.monotonic() - start, 1)
        self.steps.append({"step": name, "ok": ok, "seconds": took, "detail": detail})
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({took} s): {detail}", flush=True)
        return ok


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


def _run_once(day: Day) -> tuple[bool, str]:
    out = day.autod("run", "--once", timeout=1800)
    log = day.clone / ".autod" / "logs" / "autod.jsonl"
    ran = [json.loads(x) for x in log.read_text().splitlines() if '"check.ran"' in x] if log.exists() else []
    said = ", ".join(f"{r.get('check')}={r.get('exit_code')}" for r in ran)
    return out.returncode == 0 and bool(ran), f"exit {out.returncode}; checks {said or 'none ran'}"


def _typo(day: Day) -> tuple[bool, str]:
    out = day.autod("config", "check", env={"AUTOD_LIMTS__MAX_CYCLES_PER_HOUR": "3"})
    return out.returncode == 78 and "AUTOD_LIMTS__" in out.stderr, out.stderr.strip()[:200]


def _bad_file_under_a_running_daemon(day: Day) -> tuple[bool, str]:
    config = day.clone / "config" / "autod.yaml"
    good = config.read_text()
    log = day.clone / ".autod" / "logs" / "autod.jsonl"
    seen = len(log.read_text().splitlines()) if log.exists() else 0
    proc = subprocess.Popen([str(day.python), "-m", "autod.cli.main", "run"], cwd=day.clone, env=day.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(event: str, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            lines = log.read_text().splitlines()[seen:] if log.exists() else []
            if any(f'"event": "{event}"' in x or f'"event":"{event}"' in x for x in lines):
                return
            time.sleep(0.2)
        raise TimeoutError(f"no {event} in the log")

    try:
        wait("daemon.started")
        config.write_text(good.replace("workspace: .\n", "workspace: .\n  bogus: 1\n", 1))
        proc.send_signal(signal.SIGHUP)
        wait("config.reload_refused")
        status, pause, resume = day.autod("status"), day.autod("pause"), day.autod("resume")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
    finally:
        config.write_text(good)
        if proc.poll() is None:
            proc.kill()
    warned = "config file on disk is invalid" in status.stderr
    ok = (status.returncode, pause.returncode, resume.returncode, code) == (0, 0, 0, 0) and warned
    return ok, (f"status {status.returncode} (warned: {warned}), pause {pause.returncode}, resume"
                f" {resume.returncode}, Ctrl-C exit {code}")


def _empty_dir(day: Day, empty: Path) -> tuple[bool, str]:
    out = day.autod("run", "--once", cwd=empty, plain=True)
    said = out.stderr.strip()[:160]
    return out.returncode == 2 and "no checks" in out.stderr, f"exit {out.returncode}: {said}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venv", type=Path, help="reuse this venv (with autod's [dev] dependencies), make none")
    p.add_argument("--full", action="store_true", help="the whole suite, and the shipped checks as they are")
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
        day.step("run it (README, --once)", lambda: _run_once(day))
        day.step("misspelt override is an error", lambda: _typo(day))
        day.step("bad file under a running daemon", lambda: _bad_file_under_a_running_daemon(day))
        (Path(tmp) / "empty").mkdir()
        day.step("run --once in an empty directory", lambda: _empty_dir(day, Path(tmp) / "empty"))
    green = all(s["ok"] for s in day.steps)
    print(json.dumps({"bench": "firstday", "green": green, "full": args.full, "steps": day.steps}))
    return 0 if green else 1


if __name__ == "__main__":
    raise SystemExit(main())
