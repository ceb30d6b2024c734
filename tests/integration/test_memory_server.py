"""autod against a real `chroma run` server that goes down, dies, hangs, refuses a token and is
shared by two daemons: each daemon keeps cycling (`autod run`, offline planner, cycles fed by a
build log), `status` tells the truth, and every write it accepted reaches the store (or waits in
its spool). One server for the module; short deadlines and backoffs in the daemons' config.
"""

from __future__ import annotations

import json
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromaserver import ChromaServer, TokenProxy
from daemon import Autod, run_cli, write_config

pytestmark = [pytest.mark.slow, pytest.mark.early]  # a minute or more: handed out first

GUARD = 60.0  # hang guard, never a performance bound
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    server = ChromaServer(tmp_path_factory.mktemp("chroma"))
    if not server.chroma.exists():
        pytest.fail(f"chroma console script not found at {server.chroma} (chromadb is a dependency)")
    try:
        yield server  # not started: each test brings it to the state it needs
    finally:
        server.stop()


def daemon_config(tmp: Path, name: str, url: str, **memory: Any) -> tuple[Path, Path]:
    repo = tmp / f"repo-{name}"
    repo.mkdir()
    build_log = tmp / f"build-{name}.log"
    build_log.touch()
    cfg = {
        "workspace": str(repo),
        "state_dir": str(tmp / f"state-{name}"),
        "modes": {"auto-debug": {"enabled": True}, "auto-plan": {"enabled": False}},
        "sources": [{"type": "logtail", "path": str(build_log), "poll_s": 0.1}],
        "llm": {"base_url": None},
        "limits": {"min_interval_s": 0, "max_cycles_per_hour": 1000},
        "memory": {
            "url": url,
            "timeout_s": 2,
            "retry_min_s": 0.2,
            "retry_max_s": 1,
            "open_wait_s": 5,
            **memory,
        },
        "logging": {"level": "debug"},
    }
    return write_config(tmp / f"{name}.yaml", cfg), build_log


def fail(build_log: Path, word: str) -> None:
    """One new build error, a new fingerprint: one more cycle."""
    with build_log.open("a") as f:
        f.write(f'src/mod.py:3: error: Name "{word}" is not defined  [name-defined]\n')


def status(config: Path) -> dict[str, Any]:
    out = run_cli("status", "--json", "-c", str(config))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def wait_status(config: Path, pred: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + GUARD
    while True:
        got = status(config)
        if pred(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last status: {got.get('memory')}")
        time.sleep(0.3)


def caught_up(s: dict[str, Any]) -> bool:
    return s.get("memory") == "ok" and s["memory_status"]["spooled"] == 0


def instance(tmp: Path, name: str) -> str:
    return (tmp / f"state-{name}" / "instance-id").read_text().strip()


def spooled(tmp: Path, name: str, kind: str) -> int:
    import sqlite3

    db = sqlite3.connect(tmp / f"state-{name}" / "memory-spool.db")
    try:
        return int(db.execute("SELECT COUNT(*) FROM spool WHERE kind = ?", (kind,)).fetchone()[0])
    finally:
        db.close()


def test_daemon_rides_out_a_server_down_at_start_killed_and_hung_and_loses_nothing(
    tmp_path: Path, chroma: ChromaServer
) -> None:
    config, build_log = daemon_config(tmp_path, "a", chroma.url)
    sock_dir = Path(tempfile.mkdtemp(prefix="autod-notify-"))  # AF_UNIX paths stop at 108 bytes
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(sock_dir / "n"))
    notify.settimeout(GUARD)
    d = Autod(config, log_file=tmp_path / "state-a/logs/autod.jsonl").start()
    cycles = 0
    try:
        # down at start: the daemon still starts, answers on its socket and cycles, without memory
        d.wait_for(lambda recs: any(r.get("event") == "daemon.started" for r in recs), GUARD, "start-up")
        s = status(config)
        assert s["memory"].startswith("degraded (Chroma server") and "unreachable" in s["memory"]
        assert "since " in s["memory"] and s["memory_status"]["state"] == "degraded"
        for word in WORDS[:2]:
            fail(build_log, word)
            cycles += 1
            d.wait_reflections(cycles, GUARD)
        assert status(config)["memory_status"]["spooled"] >= 2 * cycles  # an observation and an episode each
        # the server comes up: the daemon finds it by itself and replays what it spooled
        chroma.start()
        wait_status(config, caught_up, "memory ok with the spool replayed")
        me = instance(tmp_path, "a")
        assert len(chroma.items(f"mem_n0.{me}")) == cycles
        assert len(chroma.items(f"mem_n1.{me}")) == cycles

        # killed mid-run
        chroma.kill()
        for word in WORDS[2:4]:
            fail(build_log, word)
            cycles += 1
            d.wait_reflections(cycles, GUARD)
        assert status(config)["memory"].startswith("degraded (")
        chroma.start()
        wait_status(config, caught_up, "memory ok after the restart")
        assert len(chroma.items(f"mem_n0.{me}")) == cycles
        assert len(chroma.items(f"mem_n1.{me}")) == cycles

        # hung (SIGSTOP): cycles still finish, each recall bounded by the deadline
        chroma.hang()
        for word in WORDS[4:6]:
            fail(build_log, word)
            cycles += 1
            d.wait_reflections(cycles, GUARD)
        s = wait_status(
            config, lambda s: s.get("memory", "").startswith("degraded"), "memory degraded by the hang"
        )
        assert "did not answer" in s["memory"] or "took longer" in s["memory"] or "still stuck" in s["memory"]
        assert all(r["status"] != "failed" for r in d.reflections())
        # SIGTERM while the server hangs: memory.close() must not block the stop
        started = time.monotonic()
        d.signal(signal.SIGTERM)
        assert d.proc is not None and d.proc.wait(GUARD) == 0
        stop_s = time.monotonic() - started
        left = spooled(tmp_path, "a", "n0") + spooled(tmp_path, "a", "n1")
        # start again while it still hangs: the control socket and READY=1 do not wait for it
        d = Autod(
            config, log_file=tmp_path / "state-a/logs/autod.jsonl", env={"NOTIFY_SOCKET": str(sock_dir / "n")}
        )
        d.start()
        messages = ""
        while "READY=1" not in messages:
            messages += notify.recv(4096).decode() + "\n"
        assert "EXTEND_TIMEOUT_USEC=" in messages  # while it waited for the store
        s = status(config)
        assert s["memory"].startswith("degraded (") and s["memory_status"]["spooled"] == left > 0
        chroma.resume()  # back: what the last run spooled reaches the store
        wait_status(config, caught_up, "memory ok with the last run's spool replayed")
        assert len(chroma.items(f"mem_n0.{me}")) == cycles
        assert len(chroma.items(f"mem_n1.{me}")) == cycles
    finally:
        d.kill()
        chroma.resume()
        notify.close()
        (sock_dir / "n").unlink(missing_ok=True)
        sock_dir.rmdir()
    print(f"stopped {stop_s:.1f} s after SIGTERM with the server hung; {left} writes waited in the spool")


def test_two_daemons_share_a_token_protected_server_and_keep_to_their_own_items(
    tmp_path: Path, chroma: ChromaServer
) -> None:
    if chroma.proc is None:
        chroma.start()
    token = "fleet-token-7c0ffee"
    proxy = TokenProxy(chroma.url, token).start()
    good = tmp_path / "good.token"
    good.write_text(token + "\n")
    bad = tmp_path / "b.token"
    bad.write_text("not-the-token\n")
    # two daemons, two retentions, one server
    config_a, _ = daemon_config(
        tmp_path, "a", proxy.url, auth_token_file=str(good), n0={"ttl_days": 7, "max_items": 10}
    )
    config_b, log_b = daemon_config(
        tmp_path, "b", proxy.url, auth_token_file=str(bad), auth_header="x-chroma-token"
    )
    a = Autod(config_a, log_file=tmp_path / "state-a/logs/autod.jsonl").start()
    b = Autod(config_b, log_file=tmp_path / "state-b/logs/autod.jsonl").start()
    try:
        wait_status(config_a, caught_up, "daemon a connected with its token")
        s = wait_status(config_b, lambda s: s.get("memory", "").startswith("degraded"), "daemon b refused")
        assert "refused the token" in s["memory"] and "memory.auth_token" in s["memory"]
        fail(log_b, "kilo")  # b keeps cycling while the server refuses it; the writes wait in its spool
        b.wait_reflections(1, GUARD)
        bad.write_text(token + "\n")
        b.signal(signal.SIGHUP)  # reload: b retries at once with the new token
        wait_status(config_b, caught_up, "daemon b connected after the reload")
        me_a, me_b = instance(tmp_path, "a"), instance(tmp_path, "b")
        assert len(chroma.items(f"mem_n0.{me_b}")) == 1  # the cycle it ran while refused

        # seed each daemon's items straight into the server: 15 observations each, and b's lesson
        client = chroma.client()
        now = time.time()
        for who, ws in ((me_a, "repo-a"), (me_b, "repo-b")):
            client.get_collection(f"mem_n0.{who}").add(  # each daemon's observations: its own collection
                ids=[f"{who}-{i}" for i in range(15)],
                embeddings=[[1.0 if j == i % 384 else 0.0 for j in range(384)] for i in range(15)],
                documents=[f"observation {i} of {ws}: secret log line" for i in range(15)],
                metadatas=[
                    {"instance": who, "workspace": f"/x/{ws}", "ts": now - 60 * (15 - i)} for i in range(15)
                ],
            )
        lesson_b = "When mod.py names an undefined kilo, import kilo from the settings module"
        client.get_collection("mem_n2").add(
            ids=["lesson-b"],
            embeddings=[[0.05] * 384],
            documents=[lesson_b],
            metadatas=[
                {
                    "instance": me_b,
                    "workspace": "/x/repo-b",
                    "ts": now,
                    "last_used": now,
                    "uses": 1,
                    "successes": 1,
                    "polarity": "success",
                }
            ],
        )
        # a prunes its own items to its max_items; b's are not a's to evict
        pruned = run_cli("memory", "prune", "--json", "-c", str(config_a))
        assert pruned.returncode == 0, pruned.stderr
        assert json.loads(pruned.stdout)["removed"]["n0"] == 5
        assert len(chroma.items(f"mem_n0.{me_a}")) == 10
        assert len(chroma.items(f"mem_n0.{me_b}")) == 16
        pruned_b = run_cli("memory", "prune", "--json", "-c", str(config_b))
        assert json.loads(pruned_b.stdout)["removed"] == {"n0": 0, "n1": 0, "n2": 0}
        # a recalls b's lesson, labelled as b's, and never b's raw observations
        found = run_cli(
            "memory", "search", "undefined kilo settings", "--tier", "N2", "--json", "-c", str(config_a)
        )
        shared = [h for h in json.loads(found.stdout)["hits"] if h["id"] == "lesson-b"]
        assert shared and shared[0]["text"].startswith("[shared by another autod (repo-b)] ")
        found = run_cli(
            "memory", "search", "secret log line of repo-b", "-k", "40", "--json", "-c", str(config_a)
        )
        hits = json.loads(found.stdout)["hits"]
        assert hits and not any("of repo-b" in h["text"] for h in hits)
        stats = run_cli("memory", "stats", "--json", "-c", str(config_a))
        n0 = json.loads(stats.stdout)["stats"]["tiers"]["n0"]
        assert n0["own"] == n0["count"] == 10 and n0["collection"] == f"mem_n0.{me_a}"
    finally:
        for d in (a, b):
            d.stop(GUARD)
        proxy.stop()
    for d, name in ((a, "a"), (b, "b")):
        text = d.stderr() + (tmp_path / f"state-{name}/logs/autod.jsonl").read_text()
        assert token not in text and "not-the-token" not in text
    assert proxy.refused > 0
