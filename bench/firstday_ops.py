"""The operator's steps of bench_firstday.py, each through the real CLI and `autod run` as a process.

They run on autod's demo project (what `autod run` writes in an empty directory: a pytest check that
passes, a ruff check that fails on an unused import, the ruff fixer) and the offline planner: no
model, no server. A step returns (ok, detail), or says each of several that share one daemon
through `say`; a step that cannot go on raises, and the caller prints it red.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

Autod = Callable[..., subprocess.CompletedProcess[str]]


class Running:
    """`autod run` in `cwd` as a process; waits on its JSON log (the state dir is `cwd/.autod`)."""

    def __init__(self, python: Path, cwd: Path, env: dict[str, str], *args: str) -> None:
        self.log = cwd / ".autod" / "logs" / "autod.jsonl"
        self.seen = len(self.log.read_text().splitlines()) if self.log.exists() else 0
        self.proc = subprocess.Popen([str(python), "-m", "autod.cli.main", "run", *args], cwd=cwd, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def records(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()[self.seen:] if self.log.exists() else []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def wait(self, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = 300,
             nth: int = 1) -> dict[str, Any]:
        """The `nth` record of this run that `pred` accepts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = [r for r in self.records() if pred(r)][nth - 1:]
            if hits:
                return hits[0]
            if self.proc.poll() is not None:
                raise RuntimeError(f"autod exited {self.proc.returncode} before {what}")
            time.sleep(0.2)
        raise TimeoutError(f"no {what} within {timeout:.0f} s")

    def event(self, name: str, nth: int = 1, timeout: float = 300) -> dict[str, Any]:
        return self.wait(lambda r: r.get("event") == name, f"{name} #{nth}", timeout, nth)

    def stop(self) -> int:
        """Ctrl-C, as at a terminal: the README says it exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def copy_of_demo(demo: Path, dest: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """The demo as committed (its lint failure intact), with `change` applied to its config."""
    subprocess.run(["git", "clone", "-q", str(demo), str(dest)], check=True, timeout=120)
    config = dest / "autod.yaml"
    cfg = yaml.safe_load(config.read_text())
    change(cfg)
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


def demo_and_undo(python: Path, autod: Autod, env: dict[str, str], demo: Path,
                  say: Callable[[str, bool, str], None]) -> None:
    """`autod run` in an empty directory: the demo fixed; `autod undo`; a save: held, not re-applied."""
    d = Running(python, demo, env)
    try:
        ready = d.event("daemon.ready", timeout=300)
        fixed = d.wait(lambda r: r.get("event") == "cycle.outcome", "the demo's cycle")
        inventory = (demo / "inventory.py").read_text()
        ok = fixed.get("outcome") == "fixed" and "import os" not in inventory
        say("run in an empty directory: the demo, fixed", ok,
            f"ready: {ready.get('said')}; then: {fixed.get('said')}")
        cycle = str(fixed.get("cycle"))
        undo = autod("undo", cycle, "--reason", "keep the import", cwd=demo)
        back = "import os" in (demo / "inventory.py").read_text()
        test = demo / "test_inventory.py"
        test.write_text(test.read_text() + "\n# a save elsewhere\n")  # the next cycle for the failure
        later = d.wait(lambda r: r.get("event") == "cycle.outcome" and r.get("cycle") != cycle,
                       "the next cycle after the undo")
        still = "import os" in (demo / "inventory.py").read_text()
        ok = undo.returncode == 0 and back and later.get("outcome") == "pending_approval" and still
        said = f"undo exit {undo.returncode} ({undo.stdout.strip()[:120]}); after a save: {later.get('said')}"
        say("undo, and the undone fix is not made again", ok, said)
    finally:
        code = d.stop()
    say("Ctrl-C stops the daemon", code == 0, f"exit {code}")


def one_branch(python: Path, env: dict[str, str], demo: Path, dest: Path) -> tuple[bool, str]:
    """delivery: branch; a restart meets the same failure (the tree is untouched): no second branch,
    whether the failure is dropped as already on its branch or its cycle goes to the one open."""

    def to_branch(cfg: dict[str, Any]) -> None:
        cfg["modes"]["auto-debug"]["delivery"] = "branch"

    repo = copy_of_demo(demo, dest, to_branch)
    said = []
    for run in (1, 2):
        d = Running(python, repo, env)
        try:
            r = d.wait(lambda x: x.get("event") in ("cycle.outcome", "dispatch.event_dropped"),
                       f"run {run}'s cycle, or its event dropped")
            said.append(str(r.get("said") or f"dropped: {r.get('reason')}"))
        finally:
            d.stop()
    branches = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/autod/").split()
    untouched = "import os" in (repo / "inventory.py").read_text()
    ok = len(branches) == 1 and untouched and said[0].startswith("fixed") and branches[0] in said[-1]
    return ok, f"branches {branches}; run 1: {said[0][:140]}; after a restart: {said[-1][:200]}"


def quarantine_clear(
    python: Path, autod: Autod, env: dict[str, str], demo: Path, dest: Path
) -> tuple[bool, str]:
    """A fixer that fixes nothing and one try allowed: quarantined; `quarantine clear` runs the check."""

    def stubborn(cfg: dict[str, Any]) -> None:
        cfg["checks"]["lint-fix"]["run"] = "python -c pass"
        cfg["limits"] = {"max_attempts_per_fingerprint": 1}

    repo = copy_of_demo(demo, dest, stubborn)
    d = Running(python, repo, env)
    try:
        first = d.wait(lambda r: r.get("event") == "cycle.outcome", "the first cycle")
        deadline = time.monotonic() + 60
        listed: list[Any] = []
        while not listed and time.monotonic() < deadline:
            listed = json.loads(autod("quarantine", "--json", cwd=repo).stdout or "[]")
            time.sleep(0.5)
        cleared = autod("quarantine", "clear", "--all", cwd=repo)
        first_id = first.get("cycle")
        again = d.wait(lambda r: r.get("event") == "cycle.outcome" and r.get("cycle") != first_id,
                       "a cycle after the clear (no save, no trigger)", timeout=120)
    finally:
        d.stop()
    ok = bool(listed) and cleared.returncode == 0 and "running lint now" in cleared.stdout
    then = str(again.get("said", ""))[:140]
    return ok, f"quarantined {len(listed)}; `{cleared.stdout.strip()[:100]}`; then: {then}"


def bad_file_under_a_running_daemon(d: Running, autod: Autod, config: Path) -> tuple[bool, str]:
    """A config made invalid under the daemon: the reload is refused, and status, pause and resume
    still work (saying the file is bad); the mended file reloads."""
    good = config.read_text()
    try:
        config.write_text(good.replace("workspace: .\n", "workspace: .\n  bogus: 1\n", 1))
        d.proc.send_signal(signal.SIGHUP)
        d.event("config.reload_refused", timeout=60)
        status, pause, resume = autod("status"), autod("pause"), autod("resume")
    finally:
        config.write_text(good)
    d.proc.send_signal(signal.SIGHUP)
    d.event("config.reloaded", timeout=60)
    warned = "config file on disk is invalid" in status.stderr
    ok = (status.returncode, pause.returncode, resume.returncode) == (0, 0, 0) and warned
    return ok, (f"status {status.returncode} (warned: {warned}), pause {pause.returncode}, resume"
                f" {resume.returncode}; the mended file reloaded")


def unused_import_fixed(d: Running, clone: Path, module: str = "autod/tally.py") -> tuple[bool, str]:
    """The README's first fix on autod's own checkout: a save adds an unused import to `module`; lint
    fails, the `lint-fix` fixer removes it, the checks confirm, and the cycle says so. Timed from the
    save to `cycle.outcome`."""
    path = clone / module
    text = path.read_text()
    first = next(line for line in text.splitlines() if line.startswith("import "))
    saved = time.monotonic()
    path.write_text(text.replace(first + "\n", first + "\nimport json\n", 1))
    said = d.wait(lambda r: r.get("event") == "cycle.outcome", "the cycle after the save", timeout=900)
    took = time.monotonic() - saved
    ok = said.get("outcome") == "fixed" and path.read_text() == text
    return ok, f"{took:.1f} s from the save: {str(said.get('said'))[:300]}"


def typo_in_the_file(autod: Autod, config: Path, scratch: Path) -> tuple[bool, str]:
    """A misspelt key in the YAML: exit 78, one line naming the file, the line and the field."""
    text = config.read_text()
    bad = scratch / "autod.yaml"
    bad.write_text(text.replace("  max_cycles_per_hour:", "  max_cycles_per_hr:", 1))
    line = next(n for n, x in enumerate(bad.read_text().splitlines(), 1) if "max_cycles_per_hr:" in x)
    out = autod("config", "check", "-c", str(bad))
    said = out.stderr.strip()
    want = f"{bad}:{line}: limits.max_cycles_per_hr: unknown key"
    return out.returncode == 78 and want in said, f"exit {out.returncode}: {said[:200]}"


def environment() -> dict[str, str]:
    """The operator's environment without autod's own and systemd's variables."""
    drop = ("AUTOD_", "NOTIFY_", "WATCHDOG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.pop("RUNTIME_DIRECTORY", None)
    return env
