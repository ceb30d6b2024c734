"""Trust boundary, second round (issue 20), families 1, 2 and 4, through `autod run` and real bwrap.

One daemon, started paused, over a workspace without `.git` whose committed `.venv/bin/python` is a
symlink into the credentials directory (a stranger's commit). Its checks are the attacks (the
repository's own code, `attack/attacks.py`, as any test a check runs):
- probe1..3 (bwrap, at start): read the key, the state db, the daemon's home and config, talk to
  the control socket in systemd's runtime directory (status, resume the paused daemon), and
  re-point `.venv/bin/python` at the next hidden place for the next probe (runtime dir -> key file
  -> home -> state db) (family 1);
- plant (bwrap) and plant-off (`sandbox: off`): `git init`, a commit tracking `notes.txt`, and
  `core.worktree` set to a host directory whose notes.txt holds a token, so that autod's own git diff
  would put the token in the prompt (family 4);
- spy-off and spy-bwrap (on change): list the pending proposals over the control socket and
  approve them (family 2, self-approval).
Then the operator resumes (the CLI passes the peer check), the two failing tests are planned into two
proposals, six concurrent `autod approve` calls apply the first exactly once (family 2, the race), the
spies try the second, and the operator approves it. The scenario runs once (module fixture); each
family is its own test over what it recorded.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from daemon import PYTHON, Autod, run_cli, write_config
from llmserver import ScriptedLLM

pytestmark = pytest.mark.slow

KEY = "hostile2-KEY-CANARY-5b1d9e77a0c3"
HOST_TOKEN = "HOST-TOKEN-CANARY-4411"

ATTACKS = '''
import json, os, pathlib, socket, subprocess

ATTACK = os.environ.get("ATTACK", "")
ws = pathlib.Path(__file__).resolve().parent.parent
report = {}


def attempt(name, fn):
    try:
        report[name] = fn()
    except Exception as exc:
        report[name] = "refused: %s: %s" % (type(exc).__name__, str(exc)[:200])


def read(p):
    p = pathlib.Path(p)
    if p.is_dir():
        return {n: read(p / n) for n in sorted(os.listdir(p))} if len(os.listdir(p)) < 50 else "big"
    if p.is_socket():
        return "socket"
    return p.read_bytes()[:4000].decode("utf-8", "replace")


def ask(cmd, timeout=5, **kw):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(SOCK)
    s.sendall(json.dumps(dict(cmd=cmd, **kw)).encode() + b"\\n")
    buf = b""
    while not buf.endswith(b"\\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return json.loads(buf)


def repoint(target):
    py = ws / ".venv" / "bin" / "python"
    tmp = py.with_name("python.next")
    os.symlink(target, tmp)
    os.replace(tmp, py)
    return "repointed"


def git(*args):
    return subprocess.run(["git", "-C", str(ws), "-c", "user.name=x", "-c", "user.email=x@x", *args],
                          check=True, capture_output=True, text=True, input="").stdout.strip()


def plant():
    git("init", "-q")
    empty = git("hash-object", "-w", "--stdin")
    git("update-index", "--add", "--cacheinfo", "100644,%s,notes.txt" % empty)
    git("update-ref", "HEAD", git("commit-tree", git("write-tree"), "-m", "x"))
    git("config", "core.worktree", HOST)
    return "planted"


if ATTACK.startswith("probe"):
    for name, path in (("key", CREDS + "/llm_api_key"), ("creds", CREDS), ("state", STATE),
                       ("state_db", STATE + "/state.db"), ("home", HOME), ("config", CONFIG), ("run", RUN),
                       ("venv_python", str(ws / ".venv/bin/python"))):
        attempt(name, lambda path=path: read(path))
    attempt("status", lambda: ask("status").get("paused", "no answer"))
    attempt("resume", lambda: ask("resume"))
    # the next probe's view: the key file, the daemon's home, the state db
    nxt = {"probe1": CREDS + "/llm_api_key", "probe2": HOME, "probe3": STATE + "/state.db"}[ATTACK]
    attempt("repoint", lambda: repoint(nxt))
elif ATTACK.startswith("plant"):
    attempt("plant", plant)
elif ATTACK.startswith("spy"):
    attempt("proposals", lambda: [p["id"] for p in ask("proposals")["proposals"]])
    for pid in report["proposals"] if isinstance(report["proposals"], list) else []:
        attempt("approve " + pid, lambda pid=pid: ask("approve", id=pid))
if ATTACK:
    (ws / ("attack-%s.json" % ATTACK)).write_text(json.dumps(report))
'''


CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


def fix(name: str, search: str, replace: str) -> dict[str, Any]:
    edit = {"path": "src/calc.py", "search": search, "replace": replace}
    return {"summary": f"fix {name}", "edits": [edit], "verify": [f"tests-{name}"], "report": None}


def events(d: Autod, name: str) -> list[dict[str, Any]]:
    return [r for r in d.records() if r.get("event") == name]


def ran(d: Autod, *names: str) -> bool:
    done = {r.get("check") for r in d.records() if r.get("event") in ("check.ran", "check.cannot_start")}
    return set(names) <= done


class Scenario:
    """The workspace, the daemon and what each attack left behind."""

    def __init__(self, root: Path, llm: ScriptedLLM) -> None:
        self.root, self.llm = root, llm
        creds, state, home, host = root / "creds", root / "state", root / "home", root / "host"
        runtime = root / "run"  # as systemd's RuntimeDirectory=: the control socket lives here
        for d in (creds, home / ".aws", host, runtime):
            d.mkdir(parents=True)
        (creds / "llm_api_key").write_text(KEY)
        (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = HOME-CANARY-77\n")
        (host / "notes.txt").write_text(f"deploy token {HOST_TOKEN}\n")
        repo = self.repo = root / "repo"  # no .git: a plain directory
        for d in ("src", "tests", "attack", ".venv/bin"):
            (repo / d).mkdir(parents=True)
        (repo / "src" / "calc.py").write_text(CALC)
        for name, expr in (("add", "add(2, 3) == 5"), ("mul", "mul(2, 3) == 6")):  # quicker than pytest
            (repo / "tests" / f"check_{name}.py").write_text(
                f"import sys\nsys.path.insert(0, 'src')\nfrom calc import {name}\nassert {expr}, 'wrong'\n"
            )
        self.config, self.state = root / "autod.yaml", state
        consts = {"CREDS": str(creds), "STATE": str(state), "HOME": str(home), "HOST": str(host),
                  "CONFIG": str(self.config), "RUN": str(runtime), "SOCK": str(runtime / "autod.sock")}
        header = "".join(f"{k} = {v!r}\n" for k, v in consts.items())
        (repo / "attack" / "attacks.py").write_text(header + ATTACKS)
        os.symlink(runtime, repo / ".venv" / "bin" / "python")  # the stranger's commit

        attack = f"{PYTHON} attack/attacks.py"  # test code a stranger committed, run as a check
        checks: dict[str, Any] = {"sandbox": "bwrap"}  # no silent fallback: a broken bwrap fails this
        for name in ("probe1", "probe2", "probe3", "plant"):
            checks[name] = {"run": attack, "when": ["start"], "timeout_s": 60, "env": {"ATTACK": name}}
        checks["plant-off"] = {"run": attack, "when": ["start"], "timeout_s": 60,
                               "env": {"ATTACK": "plant-off"}, "sandbox": "off"}
        for name in ("add", "mul"):
            checks[f"tests-{name}"] = {"run": f"{PYTHON} tests/check_{name}.py", "when": ["start"],
                                       "timeout_s": 60}
        checks["spy-off"] = {"run": attack, "when": ["change"], "timeout_s": 60,
                             "env": {"ATTACK": "spy-off"}, "sandbox": "off"}
        checks["spy-bwrap"] = {"run": attack, "when": ["change"], "timeout_s": 60,
                               "env": {"ATTACK": "spy-bwrap"}}
        write_config(self.config, {
            "workspace": str(repo),
            "state_dir": str(state),
            "modes": {"auto-debug": {"enabled": True}, "auto-plan": {"enabled": False}},
            "checks": checks,
            "sources": [{"type": "watch", "paths": ["src"], "settle_ms": 200}],
            "llm": {"base_url": llm.base_url, "timeout_s": 20, "request_timeout_s": 10, "max_retries": 0},
            "limits": {"min_interval_s": 0, "require_confirmation": True, "retry_base_s": 3600},
            "logging": {"level": "debug"},
        })
        self.env = {"HOME": str(home), "CREDENTIALS_DIRECTORY": str(creds), "RUNTIME_DIRECTORY": str(runtime)}
        self.daemon = Autod(self.config, log_file=state / "logs" / "autod.jsonl", env=self.env)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "-c", str(self.config), env=self.env, timeout=timeout)

    def report(self, attack: str) -> dict[str, Any]:
        path = self.repo / f"attack-{attack}.json"
        return json.loads(path.read_text()) if path.exists() else {"missing": True}

    def ask(self, cmd: str, **kw: Any) -> dict[str, Any]:
        """The control socket from this (the operator's) process: quicker than a CLI process."""
        from autod.config.settings import load_config
        from autod.control.socket import request

        with mock.patch.dict(os.environ, {"RUNTIME_DIRECTORY": self.env["RUNTIME_DIRECTORY"]}):
            return request(load_config(self.config), cmd, **kw)

    def at_once(self, cmd: str, n: int, **kw: Any) -> list[dict[str, Any]]:
        socks = []
        for _ in range(n):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(300)
            sock.connect(str(Path(self.env["RUNTIME_DIRECTORY"]) / "autod.sock"))
            socks.append(sock)
        line = json.dumps({"cmd": cmd, **kw}).encode() + b"\n"
        for sock in socks:
            sock.sendall(line)

        def answer(sock: socket.socket) -> dict[str, Any]:
            with sock, sock.makefile("rb") as f:
                return json.loads(f.readline() or b"{}")

        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(answer, socks))

    def pending(self) -> list[dict[str, Any]]:
        return self.ask("proposals")["proposals"]

    def play(self) -> None:
        d = self.daemon
        self.cli("pause")
        self.llm.push_plan(fix("add", "return a - b", "return a + b"))
        self.llm.push_plan(fix("mul", "def mul(a, b):\n    return a + b", "def mul(a, b):\n    return a * b"))
        d.start()
        d.wait_for(lambda recs: ran(d, "probe1", "probe2", "probe3", "plant", "plant-off", "tests-add",
                                    "tests-mul"), 120, "the start-up checks")
        self.paused_after_probes = self.ask("status")["paused"]
        self.resumed = self.cli("resume").stdout.strip()  # the operator: the CLI passes the peer check
        d.wait_for(lambda recs: len(events(d, "proposal.stored")) >= 2, 90, "two proposals")
        self.prompts = json.dumps(self.llm.requests)
        by_summary = {p["summary"]: p for p in self.pending()}
        self.add, self.mul = by_summary.get("fix add"), by_summary.get("fix mul")
        # six concurrent approves of the first proposal: six connections made first, then six requests
        # sent at once, so every one reaches the daemon before any has been decided
        assert self.add is not None, by_summary
        self.answers = self.at_once("approve", 6, id=self.add["id"])
        # the spies try the second
        (self.repo / "src" / "touch.py").write_text("# a change: runs the `change` checks\n")
        d.wait_for(lambda recs: ran(d, "spy-off", "spy-bwrap") and not self.report("spy-off").get("missing")
                   and not self.report("spy-bwrap").get("missing"), 120, "the spies")
        self.after_spies = {p["id"]: p["status"] for p in self.pending()}
        self.calc_after_spies = (self.repo / "src" / "calc.py").read_text()
        # the operator approves the second
        self.operator = self.cli("approve", self.mul["id"], "--json") if self.mul else None
        self.approved_cycles = [r for r in d.reflections() if r.get("planner") == "operator-approved"]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Any:
    llm = ScriptedLLM().start()
    s = Scenario(tmp_path_factory.mktemp("hostile2"), llm)
    try:
        s.play()
        yield s
    finally:
        s.daemon.kill()
        llm.stop()


def test_nothing_the_workspace_points_at_is_mounted_into_a_check(scenario: Scenario) -> None:
    probes = [scenario.report(p) for p in ("probe1", "probe2", "probe3")]
    assert not [p for p in probes if p.get("missing")], probes
    seen = json.dumps(probes)
    for canary in (KEY, "HOME-CANARY-77", "SQLite format", "autod.sock"):
        assert canary not in seen, (canary, probes)
    for p in probes:  # and no probe could re-point the venv's python for the next one
        assert p["repoint"].startswith("refused: OSError") and "Read-only" in p["repoint"], p


def test_no_check_reaches_the_control_socket_to_resume_a_paused_daemon(scenario: Scenario) -> None:
    for p in ("probe1", "probe2", "probe3"):
        r = scenario.report(p)
        assert str(r["status"]).startswith("refused") and str(r["resume"]).startswith("refused"), r
    assert scenario.paused_after_probes is True, "a check resumed the paused daemon"
    assert scenario.resumed == "resumed"  # the operator's CLI still can


def test_a_check_cannot_plant_a_git_repository_that_autods_own_git_obeys(scenario: Scenario) -> None:
    assert scenario.report("plant")["plant"].startswith("refused"), scenario.report("plant")
    # with `sandbox: off` nothing stops the planting; autod's git refuses the borrowed work tree
    assert scenario.report("plant-off")["plant"] == "planted"
    assert scenario.llm.requests, "no plan was asked for"
    assert HOST_TOKEN not in scenario.prompts


def test_six_concurrent_approves_apply_a_proposal_exactly_once(scenario: Scenario) -> None:
    won = [a for a in scenario.answers if a.get("ok")]
    assert len(won) == 1 and won[0]["status"] == "fixed", scenario.answers
    lost = [a for a in scenario.answers if not a.get("ok")]
    assert all("pending" in a.get("error", "") for a in lost), lost
    add_cycles = [r for r in scenario.approved_cycles if r.get("plan_summary") == "fix add"]
    assert len(add_cycles) == 1, add_cycles


def test_a_check_cannot_approve_a_pending_proposal(scenario: Scenario) -> None:
    for spy in ("spy-off", "spy-bwrap"):
        r = scenario.report(spy)
        assert not isinstance(r["proposals"], list), (spy, r)
        assert not [k for k in r if k.startswith("approve")], (spy, r)
    assert scenario.mul is not None and scenario.after_spies.get(scenario.mul["id"]) == "pending"
    assert "a * b" not in scenario.calc_after_spies
    refused = [e["why"] for e in events(scenario.daemon, "control.peer_refused")]
    assert refused and all("session" in w or "started by the daemon" in w for w in refused), refused


def test_the_operator_still_approves_and_nothing_leaked_to_the_log(scenario: Scenario) -> None:
    assert scenario.operator is not None and json.loads(scenario.operator.stdout)["status"] == "fixed"
    assert (scenario.repo / "src" / "calc.py").read_text() == FIXED
    assert KEY not in scenario.daemon.log_file.read_text()
