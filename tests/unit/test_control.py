"""The control socket: permissions, one JSON line each way, and answers to bad requests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from autod.config.settings import Settings, load_config
from autod.control.commands import Commands
from autod.control.socket import (
    MAX_REQUEST,
    ControlPathError,
    ControlServer,
    DaemonDown,
    Handler,
    request,
    socket_path,
)


@pytest.fixture(autouse=True)
def _no_systemd_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path}\nstate_dir: {tmp_path / 'state'}\n")
    return load_config(cfg)


async def echo(req: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "echo": req}


def serve(path: Path, handler: Handler, body: Callable[[ControlServer], Awaitable[Any]]) -> Any:
    """Run body(server) while a ControlServer listens on path; stop it afterwards."""

    async def main() -> Any:
        server = ControlServer(path, handler)
        await server.start()
        try:
            return await body(server)
        finally:
            await server.stop()

    return asyncio.run(main())


async def send_raw(path: Path, data: bytes) -> dict[str, Any]:
    """Write raw bytes, read the one answer line."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=MAX_REQUEST * 2)
    try:
        writer.write(data)
        # the server may answer and hang up before it took every byte of an oversize request
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    return json.loads(line)


def test_socket_is_born_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    path = tmp_path / "run" / "autod.sock"
    old = os.umask(0)
    try:

        async def body(server: ControlServer) -> int:
            return stat.S_IMODE(path.stat().st_mode)

        mode = serve(path, echo, body)
    finally:
        os.umask(old)
    assert mode == 0o600


def test_a_request_round_trips_through_the_cli_client(settings: Settings) -> None:
    async def body(server: ControlServer) -> dict[str, Any]:
        return await asyncio.to_thread(request, settings, "status", timeout=10, ping=True)

    resp = serve(socket_path(settings), echo, body)
    assert resp == {"ok": True, "echo": {"cmd": "status", "ping": True}}


def test_bad_json_is_answered_with_an_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    path = tmp_path / "autod.sock"

    async def body(server: ControlServer) -> list[dict[str, Any]]:
        return [
            await send_raw(path, b"{not json\n"),
            await send_raw(path, b"[1, 2]\n"),
            await send_raw(path, b'{"no_cmd": 1}\n'),
            await send_raw(path, b'{"cmd": "status"}\n'),
        ]

    bad_json, not_object, no_cmd, good = serve(path, echo, body)
    for resp in (bad_json, not_object, no_cmd):
        assert resp["ok"] is False and resp["error"].startswith("bad request"), resp
    assert "'cmd'" in no_cmd["error"]
    assert good == {"ok": True, "echo": {"cmd": "status"}}


def test_unknown_command_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "autod.sock"
    commands = Commands(None)  # type: ignore[arg-type]  # an unknown command never touches the daemon

    async def body(server: ControlServer) -> dict[str, Any]:
        return await send_raw(path, b'{"cmd": "frobnicate"}\n')

    resp = serve(path, commands.handle, body)
    assert resp == {"ok": False, "error": "unknown command 'frobnicate'"}


def test_oversize_request_gets_an_error_answer_not_a_dropped_connection(tmp_path: Path) -> None:
    path = tmp_path / "autod.sock"
    calls: list[dict[str, Any]] = []

    async def counting(req: dict[str, Any]) -> dict[str, Any]:
        calls.append(req)
        return {"ok": True}

    huge = b'{"cmd": "status", "pad": "' + b"x" * (MAX_REQUEST + 10) + b'"}\n'

    async def body(server: ControlServer) -> tuple[dict[str, Any], dict[str, Any]]:
        return await send_raw(path, huge), await send_raw(path, b'{"cmd": "status"}\n')

    oversize, after = serve(path, counting, body)
    assert oversize["ok"] is False and f"longer than {MAX_REQUEST} bytes" in oversize["error"]
    assert after == {"ok": True}
    assert calls == [{"cmd": "status"}]  # the oversize request never reached the handler


def test_a_crashing_command_answers_internal_error_without_its_message(tmp_path: Path) -> None:
    path = tmp_path / "autod.sock"

    async def crash(req: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("token sk-do-not-echo")

    async def body(server: ControlServer) -> dict[str, Any]:
        return await send_raw(path, b'{"cmd": "status"}\n')

    resp = serve(path, crash, body)
    assert resp == {"ok": False, "error": "internal error: RuntimeError"}


def test_client_says_daemon_down_without_a_socket_or_with_a_stale_one(settings: Settings) -> None:
    path = socket_path(settings)
    with pytest.raises(DaemonDown):
        request(settings, "status", timeout=5)
    path.parent.mkdir(parents=True, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a socket file left behind by a killed daemon: nobody listens
    stale.close()
    with pytest.raises(DaemonDown):
        request(settings, "status", timeout=5)


def test_stop_removes_the_socket_and_start_replaces_a_stale_one(tmp_path: Path) -> None:
    path = tmp_path / "autod.sock"
    path.write_text("left behind")

    async def body(server: ControlServer) -> bool:
        return stat.S_ISSOCK(path.stat().st_mode)

    assert serve(path, echo, body) is True
    assert not path.exists()


def test_the_socket_path_appears_only_once_it_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`autod run` and then a CLI command at once: a client that finds the path must be able to connect.
    Bound but not listening, the socket refuses (ECONNREFUSED, "the daemon is down"); every step of
    start() between the bind and the listen is probed here for a path that exists and refuses."""
    import autod.control.socket as control

    path = tmp_path / "state" / "autod.sock"
    refused: list[str] = []

    def probe(step: str) -> None:
        if not path.exists():
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(path))
            except ConnectionRefusedError:
                refused.append(step)

    real_chmod, real_start = os.chmod, asyncio.start_unix_server

    def chmod(target: Any, mode: int) -> None:
        probe("chmod")
        real_chmod(target, mode)

    async def start_unix_server(*args: Any, **kw: Any) -> asyncio.Server:
        probe("start_unix_server")
        return await real_start(*args, **kw)

    monkeypatch.setattr(control.os, "chmod", chmod)
    monkeypatch.setattr(control.asyncio, "start_unix_server", start_unix_server)
    path.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a socket left by a daemon that was killed: gone until the new one listens
    stale.close()

    async def body(server: ControlServer) -> dict[str, Any]:
        return await send_raw(path, b'{"cmd": "ping"}\n')

    assert serve(path, echo, body)["ok"] is True
    assert refused == [] and sorted(p.name for p in path.parent.iterdir()) == []


def test_socket_path_uses_the_systemd_runtime_directory_when_given(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert socket_path(settings) == settings.state_path / "autod.sock"
    monkeypatch.setenv("RUNTIME_DIRECTORY", "/run/autod")
    assert socket_path(settings) == Path("/run/autod/autod.sock")


def test_a_deep_state_dir_is_reached_through_its_directory_and_nothing_lands_in_tmp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path}\nstate_dir: {deep}\n")
    settings = load_config(cfg)
    path = socket_path(settings)
    assert path == deep / "autod.sock" and len(str(path)) > 108
    tmp = Path(tempfile.gettempdir())
    before = {p.name for p in tmp.iterdir()}
    live: list[str] = []

    async def body(server: ControlServer) -> dict[str, Any]:
        assert stat.S_ISSOCK(path.stat().st_mode) and stat.S_IMODE(path.stat().st_mode) == 0o600
        # while the server listens: no socket in /tmp, nor in a directory made there since the start
        # (the tests beside this one, xdist workers, make their own scratch directories in /tmp at any
        # time, so a new name there says nothing; a socket in one does)
        live.extend(str(p) for p in _sockets_under(tmp, before))
        return await asyncio.to_thread(request, settings, "status", timeout=10)

    assert serve(path, echo, body) == {"ok": True, "echo": {"cmd": "status"}}
    assert live == []
    assert _sockets_under(tmp, before) == []
    assert not path.exists()


def _planted(directory: Path, mode: int) -> Path:
    """A listening socket someone put in `directory` (chmod'ed to `mode`)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "autod.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen()
    directory.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_the_client_refuses_a_socket_in_a_directory_others_can_write(
    tmp_path: Path, mode: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared directory like /tmp (sticky or not): another user can claim the name first."""
    shared = tmp_path / "shared"
    _planted(shared, mode)
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(shared))
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path}\n")
    with pytest.raises(ControlPathError, match=r"refusing the control socket .*writable by other users"):
        request(load_config(cfg), "approve", timeout=5, id="p1")


def test_the_client_refuses_a_socket_below_a_world_writable_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)  # not sticky: anyone could rename `private` away and plant their own
    _planted(open_dir / "private", 0o700)
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(open_dir / "private"))
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path}\n")
    with pytest.raises(ControlPathError, match="writable by every user"):
        request(load_config(cfg), "status", timeout=5)


def test_the_client_refuses_a_file_that_is_not_a_socket(settings: Settings) -> None:
    path = socket_path(settings)
    path.parent.mkdir(parents=True)
    path.write_text("not a socket")
    with pytest.raises(ControlPathError, match="not a socket"):
        request(settings, "status", timeout=5)


def _sockets_under(tmp: Path, before: set[str]) -> list[Path]:
    """Sockets in `tmp`, or one level inside a directory of it, whose top-level name is not in `before`."""
    found: list[Path] = []
    for entry in tmp.iterdir():
        if entry.name in before:
            continue
        try:
            if entry.is_socket():
                found.append(entry)
            elif entry.is_dir() and not entry.is_symlink():
                found += [p for p in entry.iterdir() if p.is_socket()]
        except OSError:  # another worker's directory, gone or private: not this server's doing
            continue
    return found
