"""The control socket: one JSON request line in, one JSON response line out, mode 0600."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from autod.config import Settings

log = structlog.get_logger("autod.control")

MAX_REQUEST = 1 << 20
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def socket_path(settings: Settings) -> Path:
    """$RUNTIME_DIRECTORY/autod.sock under systemd, else <state_dir>/autod.sock (short fallback in /tmp).

    The unit's RuntimeDirectory= sets RUNTIME_DIRECTORY for the daemon, and the installed `autod`
    wrapper sets the same for the CLI, so both meet at /run/autod/autod.sock.
    """
    runtime = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    path = Path(runtime) / "autod.sock" if runtime else settings.state_path / "autod.sock"
    if len(str(path)) > 100:  # AF_UNIX paths are limited to 108 bytes
        digest = hashlib.sha1(str(settings.state_path).encode()).hexdigest()[:12]
        path = Path(tempfile.gettempdir()) / f"autod-{digest}.sock"
    return path


class ControlServer:
    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o177)  # the socket is born 0600: no window where others could connect
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=MAX_REQUEST
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), timeout=10)
            except ValueError:  # longer than the reader's limit: answer instead of killing the task
                line = None
            try:
                if line is None:
                    raise ValueError(f"longer than {MAX_REQUEST} bytes")
                request = json.loads(line)
                if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
                    raise ValueError("request must be an object with a 'cmd'")
                response = await self.handler(request)
            except (ValueError, json.JSONDecodeError) as exc:
                response = {"ok": False, "error": f"bad request: {exc}"}
            except Exception as exc:
                log.exception("control command failed")
                response = {"ok": False, "error": f"internal error: {type(exc).__name__}"}
            writer.write(json.dumps(response, default=str).encode() + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class DaemonDown(Exception):
    pass


def request(settings: Settings, cmd: str, timeout: float = 600, **args: Any) -> dict[str, Any]:
    """Blocking client used by the CLI. Raises DaemonDown when nothing listens."""
    path = socket_path(settings)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonDown(str(path)) from exc
        s.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    if not buf:
        raise DaemonDown("the daemon closed the connection")
    return json.loads(buf)
