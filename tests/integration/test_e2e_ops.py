"""Operating autod end to end: approvals, pause/resume, status, history, sd_notify, logs -f, run --once.

Every daemon here is `autod run` as a subprocess on a real git repository; the LLM is the scripted
loopback server. Reload with a bad config is covered in test_e2e_debug.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from daemon import AUTOD, CALC_BUGGY, FIX_PLAN, SYSTEMD_VARS, Autod, base_config, git, run_cli, write_config

pytestmark = pytest.mark.slow

CALC_FIXED = CALC_BUGGY.replace("a - b", "a + b")
SWAP_PLAN = {
    "summary": "write mul with its operands swapped",
    "edits": [{"path": "src/calc.py", "search": "return a * b", "replace": "return b * a"}],
    "verify": ["tests"],
    "report": None,
}


def start(
    tmp_path: Path, repo: Path, llm_url: str | None, *, env: dict[str, str] | None = None, **overrides: Any
) -> Autod:
    """`autod run` on repo with the test defaults plus overrides (state and log under tmp_path)."""
    return Autod(
        configure(tmp_path, repo, llm_url, **overrides), log_file=log_path(tmp_path), env=env
    ).start()


def configure(tmp_path: Path, repo: Path, llm_url: str | None, **overrides: Any) -> Path:
    cfg = base_config(repo, **overrides)
    cfg["llm"]["base_url"] = llm_url
    cfg["state_dir"] = str(tmp_path / "state")
    return write_config(tmp_path / "autod.yaml", cfg)


def log_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "logs" / "autod.jsonl"


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "-c", str(config))


def cli_json(config: Path, *args: str) -> Any:
    out = cli(config, *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def proposals_in_db(state_dir: Path) -> dict[str, tuple[str, str | None]]:
    """id -> (status, reason), read straight from the state db (read-only)."""
    con = sqlite3.connect(f"file:{state_dir / 'state.db'}?mode=ro", uri=True)
    try:
        return {row[0]: (row[1], row[2]) for row in con.execute("SELECT id, status, reason FROM proposals")}
    finally:
        con.close()


def trigger(config: Path, message: str) -> None:
    out = cli(config, "trigger", "auto-debug", "--message", message)
    assert out.returncode == 0, out.stderr


# -- approvals ----------------------------------------------------------------------------------


def test_proposals_wait_for_the_operator_who_approves_rejects_and_is_refused_a_stale_plan(
    tmp_path, calc_repo, scripted_llm
):
    scripted_llm.push_plan(FIX_PLAN)
    d = start(
        tmp_path, calc_repo, scripted_llm.base_url, limits={"min_interval_s": 0, "require_confirmation": True}
    )
    config, state_dir = d.config, tmp_path / "state"
    calc = calc_repo / "src" / "calc.py"
    try:
        # the failing check's cycle stops at a proposal: nothing is written
        (r,) = d.wait_reflections(1)
        assert r["status"] == "pending_approval" and r["proposal_id"], r
        assert calc.read_text() == CALC_BUGGY and git(calc_repo, "status", "--porcelain") == ""
        (p,) = cli_json(config, "proposals")
        assert p["id"] == r["proposal_id"] and p["status"] == "pending" and p["mode"] == "auto-debug"
        assert p["summary"] == FIX_PLAN["summary"] and "check tests failed" in p["event"]
        assert "-    return a - b\n+    return a + b\n" in p["diff"]
        applies = subprocess.run(
            ["git", "-C", str(calc_repo), "apply", "--check", "-"],
            input=p["diff"],
            text=True,
            capture_output=True,
        )
        assert applies.returncode == 0, applies.stderr  # a real unified diff against the current tree
        status = cli_json(config, "status")
        assert [x["id"] for x in status["proposals"]] == [p["id"]]
        assert status["counters"]["edits_today"]["used"] == 0  # a proposal wrote nothing

        # approve by prefix: the daemon applies, verifies, reflects
        out = cli(config, "approve", p["id"][:6])
        assert out.returncode == 0, out.stdout + out.stderr
        assert "fixed" in out.stdout and "src/calc.py +1 -1" in out.stdout and "tests=0" in out.stdout
        assert out.stderr == ""  # no spinner when stderr is not a terminal
        rs = d.wait_reflections(2)
        assert rs[1]["status"] == "fixed" and rs[1]["planner"] == "operator-approved", rs[1]
        assert rs[1]["checks"][0]["name"] == "tests" and rs[1]["checks"][0]["exit_code"] == 0
        assert calc.read_text() == CALC_FIXED
        assert proposals_in_db(state_dir)[p["id"]][0] == "applied"
        assert cli_json(config, "status")["counters"]["edits_today"]["used"] == 1
        assert cli_json(config, "proposals") == []

        # a second proposal is rejected with a reason, which becomes a lesson
        scripted_llm.push_plan(SWAP_PLAN)
        trigger(config, "tidy mul")
        rs = d.wait_reflections(3)
        assert rs[2]["status"] == "pending_approval", rs[2]
        second = rs[2]["proposal_id"]
        out = cli(config, "reject", second, "--reason", "operand order is part of our style")
        assert out.returncode == 0, out.stderr
        assert proposals_in_db(state_dir)[second] == ("rejected", "operand order is part of our style")
        hits = cli_json(config, "memory", "search", "operator rejected")["hits"]
        lessons = [h["text"] for h in hits if h["tier"] == "n2" and "operator rejected" in h["text"]]
        assert lessons and "operand order is part of our style" in lessons[0]
        assert calc.read_text() == CALC_FIXED

        # a third, approved after someone edited the file by hand: refused, nothing written
        scripted_llm.push_plan(SWAP_PLAN)
        trigger(config, "tidy mul again")
        rs = d.wait_reflections(4)
        assert rs[3]["status"] == "pending_approval", rs[3]
        third = rs[3]["proposal_id"]
        by_hand = CALC_FIXED.replace("return a * b", "return a*b")
        calc.write_text(by_hand)
        out = cli(config, "approve", third)
        assert out.returncode == 1 and "not applied" in out.stderr and "rejected" in out.stderr, out.stderr
        assert calc.read_text() == by_hand
        assert proposals_in_db(state_dir)[third][0] == "failed"
        assert d.wait_reflections(5)[4]["status"] == "rejected"
        assert cli(config, "approve", third).returncode == 1  # decided proposals stay decided

        # the reflection summary, one line each, from the human log view
        out = cli(config, "logs", "--phase", "reflect", "-n", "5")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert len(lines) == 5 and all("reflect]" in line for line in lines)
        (fixed_line,) = [line for line in lines if "status=fixed" in line]
        assert "files=src/calc.py(+1 -1)" in fixed_line and "checks=tests=0" in fixed_line
    finally:
        assert d.stop() == 0


def test_per_mode_confirmation_holds_the_plan_and_an_expired_proposal_cannot_be_approved(
    tmp_path, calc_repo, scripted_llm
):
    scripted_llm.push_plan(FIX_PLAN)
    d = start(
        tmp_path,
        calc_repo,
        scripted_llm.base_url,
        modes={"auto-debug": {"enabled": True, "require_confirmation": True}},
        limits={"min_interval_s": 0, "require_confirmation": False, "proposal_ttl_h": 0.0003},  # ~1 s
    )
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "pending_approval", r
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
        pid = r["proposal_id"]
        time.sleep(1.5)  # past the TTL (not a measurement: the proposal must be stale before approving)
        out = cli(d.config, "approve", pid)
        assert out.returncode == 1 and "expired" in out.stderr, out.stdout + out.stderr
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
        assert proposals_in_db(tmp_path / "state")[pid][0] == "expired"
        assert cli_json(d.config, "proposals") == []
    finally:
        assert d.stop() == 0


# -- pause, status, history -----------------------------------------------------------------------


def test_pause_queues_without_cycles_resume_runs_them_and_status_reports_running_and_down(
    tmp_path, calc_repo, scripted_llm
):
    scripted_llm.push_plan(FIX_PLAN)
    d = start(tmp_path, calc_repo, scripted_llm.base_url)
    config = d.config
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert d.proc is not None
        st = cli_json(config, "status")
        assert st["running"] is True and st["pid"] == d.proc.pid and st["uptime_s"] > 0
        assert st["paused"] is False and st["queue"]["depth"] == 0
        assert {s["name"]: s["state"] for s in st["sources"]} == {"check": "running"}
        assert st["counters"]["edits_today"] == {"used": 1, "cap": 100}
        assert st["counters"]["cycles_last_hour"]["used"] == 1
        assert st["llm"]["reachable"] is True and st["llm"]["circuit"]["state"] == "closed"
        assert st["proposals"] == [] and st["last_cycles"][0]["status"] == "fixed"
        human = cli(config, "status")
        assert human.returncode == 0, human.stderr
        assert f"autod running (pid {d.proc.pid}" in human.stdout and "PAUSED" not in human.stdout
        assert "reachable=True circuit=closed" in human.stdout and "source check: running" in human.stdout
        assert "edits_today: 1/100" in human.stdout and "fixed" in human.stdout

        # a second daemon, even a --once, may not share the state dir: an error, not "still failing"
        once = cli(config, "run", "--once")
        assert once.returncode == 2 and f"pid {d.proc.pid}" in once.stderr, once.stderr

        assert cli(config, "pause").stdout.strip() == "paused"
        trigger(config, "while paused")
        st = cli_json(config, "status")
        assert st["paused"] is True and st["queue"]["depth"] >= 1
        time.sleep(3)  # give a (wrongly) unpaused dispatcher every chance to start a cycle
        assert len(d.reflections()) == 1
        st = cli_json(config, "status")
        assert st["waiting"] == "paused" and st["queue"]["depth"] >= 1
        assert "PAUSED" in cli(config, "status").stdout

        assert cli(config, "resume").stdout.strip() == "resumed"
        rs = d.wait_reflections(2)
        assert "while paused" in rs[1]["summary"], rs[1]
        assert cli_json(config, "status")["queue"]["depth"] == 0
    finally:
        assert d.stop() == 0

    down = cli(config, "status")
    assert down.returncode == 0 and "autod is not running" in down.stdout, down.stderr
    st = cli_json(config, "status")
    assert st["running"] is False and st["paused"] is False and len(st["last_cycles"]) == 2
    newest = cli_json(config, "history", "-n", "1")
    assert len(newest) == 1 and "while paused" in newest[0]["summary"]
    rows = cli_json(config, "history", "-n", "5")
    assert [x["status"] for x in rows][1] == "fixed" and len(rows) == 2
    assert rows[1]["edits"] == [{"path": "src/calc.py", "added": 1, "removed": 1}]


# -- sd_notify ----------------------------------------------------------------------------------


class NotifyListener:
    """An AF_UNIX datagram socket standing in for systemd's NOTIFY_SOCKET; records every message."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[tuple[float, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # read continuously: the kernel queues only ~10 datagrams and the daemon drops what does not fit
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self._lock:
                self.messages.append((time.monotonic(), fields))

    def snapshot(self) -> list[tuple[float, dict[str, str]]]:
        with self._lock:
            return list(self.messages)

    def wait_for(
        self, pred: Callable[[dict[str, str]], bool], *, after: int = 0, timeout: float = 60, what: str = ""
    ) -> int:
        """Index of the first message from `after` on that matches."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, (_, m) in enumerate(self.snapshot()[after:], start=after):
                if pred(m):
                    return i
            time.sleep(0.05)
        raise AssertionError(f"no {what} notification; got {[m for _, m in self.snapshot()]}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_sd_notify_ready_watchdog_reload_and_stop_through_autod_run(tmp_path, calc_repo):
    sock_dir = Path(tempfile.mkdtemp(prefix="autod-notify-"))  # short: AF_UNIX paths stop at 108 bytes
    listener = NotifyListener(sock_dir / "notify")
    cfg = base_config(calc_repo)
    cfg["checks"] = {}  # an idle daemon: the pings are all there is
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    env = {"NOTIFY_SOCKET": str(sock_dir / "notify"), "WATCHDOG_USEC": "400000"}
    d = Autod(config, log_file=log_path(tmp_path), env=env).start()
    try:
        ready = listener.wait_for(lambda m: m.get("READY") == "1", what="READY=1")
        assert "running" in listener.snapshot()[ready][1].get("STATUS", "")
        window_start = time.monotonic()
        time.sleep(2.0)  # an interval of 0.2 s: about 10 pings in 2 s
        pings = [t for t, m in listener.snapshot() if m.get("WATCHDOG") == "1" and t >= window_start]
        assert 3 <= len(pings) <= 40, len(pings)

        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        d.signal(signal.SIGHUP)
        reloading = listener.wait_for(
            lambda m: m.get("RELOADING") == "1", after=ready + 1, what="RELOADING=1"
        )
        usec = int(listener.snapshot()[reloading][1]["MONOTONIC_USEC"])
        assert before <= usec <= time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        listener.wait_for(lambda m: m.get("READY") == "1", after=reloading + 1, what="READY=1 after reload")

        mark = len(listener.snapshot())
        d.signal(signal.SIGTERM)
        listener.wait_for(lambda m: m.get("STOPPING") == "1", after=mark, what="STOPPING=1")
        assert d.proc is not None and d.proc.wait(60) == 0  # d.stop() would send a second SIGTERM
    finally:
        d.kill()
        listener.close()
        for leftover in sock_dir.iterdir():
            leftover.unlink()
        sock_dir.rmdir()


# -- logs -f ------------------------------------------------------------------------------------


def test_logs_follow_prints_every_line_once_in_order_across_a_rotation(tmp_path):
    log = tmp_path / "autod.jsonl"
    config = write_config(
        tmp_path / "autod.yaml", {"workspace": str(tmp_path), "logging": {"file": str(log)}}
    )

    def line(n: int) -> str:
        return json.dumps({"timestamp": f"2026-01-01T00:00:{n:02d}Z", "level": "info", "event": f"line {n}"})

    def append(path: Path, *numbers: int) -> None:
        with open(path, "a") as fh:
            fh.writelines(line(n) + "\n" for n in numbers)

    append(log, 1, 2)
    proc = subprocess.Popen(
        [*AUTOD, "logs", "-f", "--json", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in SYSTEMD_VARS},
    )
    got: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            got.append(text)

    threading.Thread(target=read, daemon=True).start()

    def wait_lines(n: int) -> None:
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(got) >= n, (got, proc.poll())

    try:
        wait_lines(2)  # the history is out: the follower now sits at the end of the file
        append(log, 3, 4)
        wait_lines(4)
        os.rename(log, log.with_name("autod.jsonl.1"))  # logrotate's rename
        append(log.with_name("autod.jsonl.1"), 5)  # the writer has not reopened yet
        append(log, 6, 7, 8)  # ... now it has
        wait_lines(8)
        time.sleep(1.0)  # several poll rounds: nothing may come twice
        assert [x.rstrip("\n") for x in got] == [line(n) for n in range(1, 9)]
    finally:
        proc.terminate()
        proc.wait(10)


# -- run --once ---------------------------------------------------------------------------------


def test_run_once_exits_2_while_paused_and_1_while_a_check_still_fails(tmp_path, calc_repo):
    config = configure(tmp_path, calc_repo, None)  # offline planner and no fixer checks: nothing can fix it
    assert "paused" in cli(config, "pause").stdout
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    assert out.returncode == 2 and "paused" in out.stderr, out.stderr[-3000:]
    assert cli_json(config, "history") == []

    cli(config, "resume")
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    assert out.returncode == 1, out.stderr[-3000:]
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
    assert len(cli_json(config, "history")) == 1


def test_run_once_exits_2_when_a_spent_token_budget_would_hold_it_until_tomorrow(
    tmp_path, calc_repo, scripted_llm
):
    # two queued events, each prompt over the budget (the loopback LLM counts 4 characters a token):
    # the second cycle would wait for the next UTC day, so --once gives up instead of hanging
    cfg = base_config(calc_repo, limits={"min_interval_s": 0, "max_tokens_per_day": 1000})
    cfg["checks"] = {}  # only the two events, in either order
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    trigger(config, "first " + "x" * 6000)
    trigger(config, "second " + "y" * 6000)
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    assert out.returncode == 2 and "max_tokens_per_day" in out.stderr, out.stderr[-3000:]
    assert len(cli_json(config, "history")) == 1
    assert cli_json(config, "status")["queue"]["depth"] == 1  # the waiting event is kept for later

    # with a budget that allows it, the next run takes the kept event and, with no checks, ends green
    cfg["limits"]["max_tokens_per_day"] = 2_000_000
    write_config(config, cfg)
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(cli_json(config, "history")) == 2 and cli_json(config, "status")["queue"]["depth"] == 0
