"""A recording pass-through between autod and the LLM server (bench_realllm.py --trace).

Forwards every request unchanged to the real server and appends one JSON line per exchange (the
request body, the status and the reply body) to a file, so a bench run shows what the model was
asked and what it answered: the prompt autod built, the plan it returned, the refusals.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}


class TracingProxy:
    """127.0.0.1 proxy to `upstream` (a base URL ending in /v1); `base_url` is where autod points."""

    def __init__(self, upstream: str, trace: Path) -> None:
        self.upstream = upstream.rstrip("/")
        self.trace = trace
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, name="trace-proxy", daemon=True)

    def __enter__(self) -> TracingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock, self.trace.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(b"")

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes) -> None:
                path = self.path.removeprefix("/v1")
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                started = time.monotonic()
                try:
                    resp = httpx.request(self.command, proxy.upstream + path, content=body or None,
                                         headers=headers, timeout=7200)
                    status, data, ctype = resp.status_code, resp.content, resp.headers.get("content-type", "")
                except httpx.HTTPError as exc:
                    status, data, ctype = 502, json.dumps({"error": {"message": str(exc)}}).encode(), ""
                entry: dict[str, Any] = {"method": self.command, "path": path, "status": status,
                                         "seconds": round(time.monotonic() - started, 1)}
                if body:
                    try:
                        entry["request"] = json.loads(body)
                    except ValueError:
                        entry["request"] = body.decode("utf-8", "replace")
                entry["reply"] = data.decode("utf-8", "replace")
                proxy._record(entry)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype or "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # autod gave up on it (its deadline); the trace still has it

        return Handler
