"""A real `chroma run` server on 127.0.0.1 that a test can kill, hang (SIGSTOP) and restart, and a
token-checking reverse proxy in front of it (chromadb 1.5's Rust server has no authentication of
its own: see docs/FLEET.md), plus helpers that count what reached the server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

HANG_GUARD_S = 60.0  # how long a server may take to answer its first heartbeat (not a performance bound)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChromaServer:
    """`chroma run` as a process group on a fixed port and data dir, so a restart keeps both."""

    def __init__(self, workdir: Path) -> None:
        self.chroma = Path(sys.executable).parent / "chroma"
        self.path = workdir / "chroma-data"
        self.log = workdir / "chroma.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ChromaServer:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(self.chroma),
                    "run",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--path",
                    str(self.path),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            )
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    return self
            if time.monotonic() > deadline:
                raise RuntimeError("chroma did not answer its heartbeat")
            time.sleep(0.1)

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL: the server is gone at once (a crash, an OOM kill)."""
        self._signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(30)
        self.proc = None

    def hang(self) -> None:
        """SIGSTOP: the port still accepts connections, nothing answers."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait(15)
        self.proc = None

    def client(self, *, tenant: str = "default_tenant", database: str = "default_database") -> Any:
        import chromadb
        from chromadb.config import Settings

        return chromadb.HttpClient(
            host="127.0.0.1",
            port=self.port,
            tenant=tenant,
            database=database,
            settings=Settings(anonymized_telemetry=False),
        )

    def items(self, collection: str, *, instance: str | None = None, **client: str) -> list[dict[str, Any]]:
        """Every item's metadata (and document) in a collection, optionally only one daemon's."""
        col = self.client(**client).get_collection(collection)
        got = col.get(where={"instance": instance} if instance else None, include=["metadatas", "documents"])
        return [{**(m or {}), "_doc": d} for m, d in zip(got["metadatas"], got["documents"], strict=True)]


class TokenProxy:
    """A reverse proxy that answers 401 unless the request carries the token (Bearer or X-Chroma-Token)."""

    def __init__(self, upstream: str, token: str) -> None:
        self.upstream, self.token = upstream, token
        self.refused = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sent = self.headers.get("X-Chroma-Token") or self.headers.get("Authorization", "")
                if sent.removeprefix("Bearer ") != proxy.token:
                    proxy.refused += 1
                    self._answer(401, b'{"error":"Unauthorized","message":"missing or wrong token"}', {})
                    return
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "authorization", "x-chroma-token", "content-length")
                }
                try:
                    resp = httpx.request(
                        self.command, proxy.upstream + self.path, content=body, headers=headers, timeout=30
                    )
                except httpx.HTTPError:
                    self._answer(502, b'{"error":"BadGateway","message":"upstream unreachable"}', {})
                    return
                self._answer(
                    resp.status_code, resp.content, {"Content-Type": resp.headers.get("content-type", "")}
                )

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    if v:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> TokenProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
