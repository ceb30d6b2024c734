"""Run `autod run` as a real subprocess and read what it logs (tests assert on disk and log lines)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

PYTHON = sys.executable
AUTOD = [PYTHON, "-m", "autod.cli.main"]
SYSTEMD_VARS = frozenset({"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "RUNTIME_DIRECTORY"})

CALC_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_TEST = (
    "import sys, pathlib\n"
    "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
    "from calc import add, mul\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)
FIX_PLAN = {
    "summary": "add must add, not subtract",
    "edits": [{"path": "src/calc.py", "search": "return a - b", "replace": "return a + b"}],
    "verify": ["tests"],
    "report": None,
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(repo: Path, files: dict[str, str]) -> Path:
    """A git repository holding `files` (relative path -> text) in one commit, autod's state ignored."""
    for rel, text in {**files, ".gitignore": ".autod/\n__pycache__/\n.pytest_cache/\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    return repo


def make_calc_repo(repo: Path) -> Path:
    return make_repo(repo, {"src/calc.py": CALC_BUGGY, "tests/test_calc.py": CALC_TEST})


def base_config(repo: Path, *, ranked: bool = False, **overrides: Any) -> dict[str, Any]:
    """A config for the calc repository. `ranked`: its pytest check is re-run under autod's recorder to
    rank code for the prompt (the product's default); off unless a test is about what a prompt shows:
    that re-run is one more pytest run per cycle, and tests/integration/test_spectrum.py and
    test_e2e_localize.py are the ranking's own tests."""
    tests: dict[str, Any] = {
        "run": f"{PYTHON} -m pytest -q -p no:cacheprovider tests",
        "timeout_s": 120,
        "when": ["start", "change"],
    }
    if not ranked:
        tests["coverage"] = False
    cfg: dict[str, Any] = {
        "workspace": str(repo),
        "modes": {"auto-debug": {"enabled": True}, "auto-plan": {"enabled": False}},
        "checks": {"tests": tests},
        "llm": {"base_url": None, "timeout_s": 20, "request_timeout_s": 10, "max_retries": 1},
        "limits": {"min_interval_s": 0},
        # one plan per attempt, from the wide prompt: the scripted LLMs below answer request by
        # request (tests of the candidate search set n and the focused draws themselves)
        "candidates": {"n": 1, "focused": 0},
        "logging": {"level": "debug"},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def write_config(path: Path, cfg: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def start_autod(tmp_path: Path, cfg: dict[str, Any], llm_url: str | None = None) -> Autod:
    """`autod run` on `cfg` (with `llm.base_url` set to `llm_url` when given), its state and log under
    `tmp_path`, started."""
    if llm_url is not None:
        cfg["llm"]["base_url"] = llm_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    return Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()


class Autod:
    """`autod run -c CONFIG` as a subprocess, with helpers to wait on its JSON log."""

    def __init__(
        self, config: Path | None, *, log_file: Path, env: dict[str, str] | None = None,
        args: tuple[str, ...] = (), cwd: Path | None = None, stderr_dir: Path | None = None,
    ) -> None:
        """`config` None: `autod run` with no -c, in `cwd`, finding its config as a user's would (its
        stderr then goes to `stderr_dir`: never into a workspace the daemon watches)."""
        self.config = config
        self.cwd = cwd or (config.parent if config is not None else Path.cwd())
        self.log_file = log_file
        # systemd variables inherited from a test runner that is itself a service must not reach the
        # daemon: it would notify the runner's manager, or skip the watchdog (WATCHDOG_PID is not its
        # pid), or share one control socket with every other test daemon. A test passes its own in env.
        inherited = {k: v for k, v in os.environ.items() if k not in SYSTEMD_VARS}
        self.env = {**inherited, "ORT_DISABLE_TELEMETRY": "1", **(env or {})}
        self.args = args
        self.proc: subprocess.Popen[str] | None = None
        where = stderr_dir or (config.parent if config is not None else None)
        assert where is not None, "autod run without -c: say where its stderr goes (stderr_dir)"
        self.stderr_path = where / f"autod-stderr-{int(time.time() * 1000)}.txt"

    def start(self) -> Autod:
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115
        config = ["-c", str(self.config)] if self.config is not None else []
        self.proc = subprocess.Popen(
            [*AUTOD, "run", *config, *self.args],
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env=self.env,
            text=True,
            cwd=str(self.cwd),
        )
        return self

    def records(self) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        out = []
        for line in self.log_file.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def reflections(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if r.get("phase") == "reflect" and "status" in r]

    def wait_for(
        self, pred: Callable[[list[dict[str, Any]]], Any], timeout: float = 60, what: str = ""
    ) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            recs = self.records()
            got = pred(recs)
            if got:
                return got
            if self.proc is not None and self.proc.poll() is not None:
                got = pred(self.records())
                if got:
                    return got
                raise AssertionError(
                    f"autod exited {self.proc.returncode} while waiting for {what}:\n{self.stderr()[-3000:]}"
                )
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; stderr:\n{self.stderr()[-3000:]}")

    def wait_ready(self, n: int = 1, timeout: float = 90) -> dict[str, Any]:
        """The daemon's `n`th readiness (`daemon.ready`: every source armed, the start-up checks run,
        the dispatcher taking events): from then on a change is seen and a trigger is worked on. Wait on
        this, never on a sleep; a reload re-arms the sources and says it again (n=2)."""
        return self.wait_for(
            lambda recs: [r for r in recs if r.get("event") == "daemon.ready"][n - 1:], timeout,
            f"daemon.ready #{n}",
        )[0]

    def wait_reflections(self, n: int, timeout: float = 90) -> list[dict[str, Any]]:
        return self.wait_for(
            lambda recs: (
                (r := [x for x in recs if x.get("phase") == "reflect" and "status" in x])[n - 1 :] and r
            ),
            timeout,
            f"{n} reflection record(s)",
        )

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 60) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if hasattr(self, "_stderr"):
            self._stderr.close()

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AUTOD, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            **{k: v for k, v in os.environ.items() if k not in SYSTEMD_VARS},
            "ORT_DISABLE_TELEMETRY": "1",
            **(env or {}),
        },
        cwd=str(cwd) if cwd else None,
    )


# A passing test file whose ids pytest takes from a set's order (a parameter it cannot print is named by
# its index), which follows the per-process string hashes unless PYTHONHASHSEED is fixed.
SET_NAMED_TESTS = (
    "import pytest\n\n"
    "CASES = {(name, (len(name),)) for name in\n"
    "         ('alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa')}\n\n\n"
    "@pytest.mark.parametrize(('name', 'expected'), CASES)\n"
    "def test_length(name, expected):\n"
    "    assert (len(name),) == expected\n"
)


def fixed_through(tmp_path: Path, calc_repo: Path, llm: dict[str, Any]) -> tuple[Autod, dict[str, Any]]:
    """`autod run` on the calc repo against `llm` until its first cycle: fixed, `add` adds. The stopped
    daemon (for its log) and the cycle's record."""
    daemon = Autod(write_config(tmp_path / "autod.yaml", base_config(calc_repo, ranked=True, llm=llm)),
                   log_file=calc_repo / ".autod/logs/autod.jsonl")
    daemon.start()
    try:
        [record] = daemon.wait_reflections(1, timeout=120)
    finally:
        assert daemon.stop() == 0
    assert record["status"] == "fixed", record
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY.replace("a - b", "a + b")
    return daemon, record


def one_fix(tmp_path: Path, repo: Path, llm: Any, reply: str) -> dict[str, Any]:
    """`autod run` on `repo` with the code reply form, the scripted server answering `reply` once and
    one attempt a cycle: the first cycle's reflection, the daemon stopped."""
    llm.push_text(reply)
    cfg = base_config(repo, llm={"reply_form": "code", "base_url": llm.base_url, "prefill": "none"},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    d = start_autod(tmp_path, cfg)
    try:
        (r,) = d.wait_reflections(1)
    finally:
        assert d.stop() == 0
    return r
