"""A real webhook receiver on 127.0.0.1 for tests: records every POST; can be down, up, or failing.

rx = Receiver()            # picks a free port, not listening yet ("down")
rx.start(); ...; rx.stop() # up, then down again on the same port
rx.fail_with = 503         # answers 503 until set back to None
rx.accepted()              # the requests it answered 2xx, in order
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.requests: list[dict[str, Any]] = []
        self.fail_with: int | None = None
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = owner.fail_with or 200
                with owner._lock:
                    owner.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body, "status": status}
                    )
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="webhook-receiver").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def accepted(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if 200 <= r["status"] < 300]

    def documents(self) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.accepted()]

    def wait_for(self, n: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.accepted()
            if len(got) >= n:
                return got
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {n} notification(s); got {len(self.accepted())}")
