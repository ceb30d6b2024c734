"""The control socket asks the kernel who is calling (SO_PEERCRED): a process inside a check's
sandbox, or anything a check started, is refused even when it can reach the socket."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from procs import alive_with

from autod.checks import process
from autod.control import peers
from autod.control.socket import ControlServer

CLIENT = (
    "import json, socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.connect(sys.argv[1])\n"
    "s.sendall(json.dumps({'cmd': 'approve', 'id': 'p1'}).encode() + b'\\n')\n"
    "print(s.recv(65536).decode())\n"
)


async def handler(req: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "approved": req.get("id")}


def serve_and_run(sock: Path, argv: list[str]) -> str:
    """The answer a client process (argv) got from a ControlServer in this process (the 'daemon')."""

    async def main() -> str:
        server = ControlServer(sock, handler)
        await server.start()
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
            return out.decode()
        finally:
            await server.stop()

    return asyncio.run(main())


def test_a_process_in_a_bwrap_sandbox_that_can_reach_the_socket_is_refused(
    tmp_path: Path, real_bwrap: None
) -> None:
    sock = tmp_path / "run" / "autod.sock"
    bwrap = shutil.which("bwrap")
    assert bwrap
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
            "--bind", str(sock.parent), str(sock.parent), "--die-with-parent",
            sys.executable, "-c", CLIENT, str(sock)]
    answer = json.loads(serve_and_run(sock, argv))
    assert answer["ok"] is False and answer["error"].startswith("refused: ")
    assert "approved" not in answer


def test_a_process_the_daemon_started_is_refused_even_without_a_sandbox(tmp_path: Path) -> None:
    sock = tmp_path / "run" / "autod.sock"
    answer = json.loads(serve_and_run(sock, [sys.executable, "-c", CLIENT, str(sock)]))
    assert answer == {"ok": False, "error": "refused: the peer was started by the daemon (a check or"
                      " what it left behind)"}


def test_a_setsid_escapee_of_a_running_check_is_refused_by_its_session_or_ancestry() -> None:
    marker = f"autod-peer-{os.getpid()}-{time.monotonic_ns()}"
    leader = subprocess.Popen(
        ["sh", "-c", f"setsid sh -c 'sleep 30; true' {marker} & wait"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 10
        escaped: list[int] = []
        while not escaped and time.monotonic() < deadline:  # the one in a session of its own
            own_session = [p for p in alive_with(marker) if (peers._stat(p) or (0, 0, 0))[2] == p]
            escaped = [p for p in own_session if p != leader.pid]
            time.sleep(0.02)
        (escapee,) = escaped
        # seen from a daemon that is not its ancestor: only the running check's record catches it
        why = peers.refusal(escapee, os.geteuid(), sessions={leader.pid}, me=1_000_000_000)
        assert why is not None and ("session" in why or "started by the daemon" in why)
    finally:
        for pid in alive_with(marker):
            os.kill(pid, 9)
        leader.kill()
        leader.wait()


def test_another_pid_namespace_is_refused_whoever_its_parent_is(real_bwrap) -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap
    child = subprocess.Popen([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                              "--unshare-pid", "--die-with-parent", "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        inner = []
        while not inner and time.monotonic() < deadline:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
            inner = [p for p in pids if _is_sleep_below(p, child.pid)]
            time.sleep(0.02)
        assert inner
        why = peers.refusal(inner[0], os.geteuid(), me=1_000_000_000)
        assert why == "the peer runs in another PID namespace (a check's sandbox)"
    finally:
        child.kill()
        child.wait()


def _is_sleep_below(pid: int, root: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    cur = pid
    for _ in range(10):
        st = peers._stat(cur)
        if st is None:
            return False
        if st[0] == root:
            return cmd.startswith(b"sleep")
        cur = st[0]
    return False


def test_the_operators_cli_from_a_shell_passes_and_strangers_do_not() -> None:
    shell = subprocess.Popen(["sleep", "30"])
    try:
        assert peers.refusal(shell.pid, os.geteuid(), me=1_000_000_000) is None
        assert peers.refusal(shell.pid, 0, me=1_000_000_000) is None  # root may
        assert "neither the daemon's" in (peers.refusal(shell.pid, 4242, euid=1000, me=1_000_000_000) or "")
        assert peers.refusal(0, os.geteuid()) == "the peer is outside the daemon's PID namespace"
    finally:
        shell.kill()
        shell.wait()


@pytest.mark.slow
def test_running_checks_are_known_while_they_run_and_forgotten_after(tmp_path: Path) -> None:
    seen: list[frozenset[int]] = []

    async def main() -> None:
        task = asyncio.ensure_future(
            process.run_session(["sleep", "1"], cwd=tmp_path, env={"PATH": os.defpath}, timeout_s=10,
                                output_limit=1024)
        )
        deadline = time.monotonic() + 10
        while not process.running_sessions() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        seen.append(process.running_sessions())
        await task
        seen.append(process.running_sessions())

    asyncio.run(main())
    assert len(seen[0]) == 1 and seen[1] == frozenset()


@pytest.fixture(autouse=True)
def _no_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
