"""A recording pass-through between autod and the LLM server (bench_realllm.py --trace).

Forwards every request unchanged to the real server and appends one JSON line per exchange (the
request body, the status and the reply body) to a file, so a bench run shows what the model was
asked and what it answered: the prompt autod built, the plan it returned, the refusals.

A streamed reply (server-sent events) is passed on chunk by chunk as the server sends it, and when
autod closes its end (a reply it ended early, a deadline) the proxy closes the server's, which ends
the generation there as it would without the proxy (`"left": true` in the trace). Buffering it
whole would let the server generate every reply to its end, and a bench would charge autod for
tokens it never waited for in use.
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
                # the API under /v1; a server's own routes at its root (llama-cpp-python's
                # /extras/tokenize, llama.cpp's /props), as autod asks them
                api = self.path.startswith("/v1/") or self.path == "/v1"
                path = self.path.removeprefix("/v1") if api else self.path
                url = (proxy.upstream if api else proxy.upstream.removesuffix("/v1")) + path
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                started = time.monotonic()
                left, sent = False, False
                parts: list[bytes] = []
                try:
                    with httpx.stream(self.command, url, content=body or None,
                                      headers=headers, timeout=7200) as resp:
                        status, ctype = resp.status_code, resp.headers.get("content-type", "")
                        if ctype.split(";")[0].strip().lower() == "text/event-stream":
                            sent = True
                            left = self._relay(resp, status, ctype, parts)
                        else:
                            parts.append(resp.read())
                except httpx.HTTPError as exc:
                    status, ctype = 502, ""
                    parts = [json.dumps({"error": {"message": str(exc)}}).encode()]
                data = b"".join(parts)
                entry: dict[str, Any] = {"method": self.command, "path": path, "status": status,
                                         "seconds": round(time.monotonic() - started, 1)}
                if body:
                    try:
                        entry["request"] = json.loads(body)
                    except ValueError:
                        entry["request"] = body.decode("utf-8", "replace")
                entry["reply"] = data.decode("utf-8", "replace")
                if left:
                    entry["left"] = True
                proxy._record(entry)
                if sent:
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype or "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # autod gave up on it (its deadline); the trace still has it

            def _relay(self, resp: httpx.Response, status: int, ctype: str, parts: list[bytes]) -> bool:
                """Pass a streamed reply on as it comes (the body ends when the connection closes).
                True when autod left before its end (the caller's exit closes the server's stream)."""
                self.close_connection = True
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for chunk in resp.iter_raw():
                        parts.append(chunk)
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return True
                return False

        return Handler
