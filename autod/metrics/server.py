"""Serving /metrics with prometheus_client's own HTTP server (a thread of its own) on loopback.

A port in use, or any other bind error, is a log line and a `status` entry, never a stop: the daemon
keeps running and the server tries again with backoff, and picks up a changed `metrics.listen` on reload.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from prometheus_client import start_http_server

from autod import logs
from autod.backoff import Backoff
from autod.config.listen import parse_listen
from autod.metrics.registry import Metrics

log = structlog.get_logger("autod.metrics")

WATCH_S = 2.0  # how often a reload's new `metrics.listen` is looked at
RETRY_MIN_S = 5.0
RETRY_MAX_S = 300.0


class MetricsServer:
    """Owns the HTTP server thread; `status()` is what `autod status` shows."""

    def __init__(
        self, metrics: Metrics, *, retry_min_s: float = RETRY_MIN_S, watch_s: float = WATCH_S
    ) -> None:
        self.metrics = metrics
        self.retry_min_s, self.watch_s = retry_min_s, watch_s
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.listen: str | None = None  # what it serves, or tries to
        self.address: str | None = None  # host:port actually bound
        self.error: str | None = None
        self.since: float | None = None
        self.next_try: float | None = None

    def status(self) -> dict[str, Any]:
        if self.listen is None:
            return {"state": "off"}
        if self.address is not None:
            return {"state": "serving", "url": f"http://{self.address}/metrics", "since": self.since}
        return {
            "state": "failed",
            "listen": self.listen,
            "error": self.error,
            "since": self.since,
            "next_try": self.next_try,
        }

    async def run(self, listen: Callable[[], str | None]) -> None:
        """Serve while the daemon runs (cancel to stop); rebinds when `listen()` changes."""
        backoff, failures = Backoff(self.retry_min_s, RETRY_MAX_S), 0
        try:
            while True:
                want = listen()
                if want != self.listen:
                    await self._close()
                    self.listen, self.error, self.since, self.next_try = want, None, time.time(), None
                    failures = 0
                    if want is not None:
                        await self._bind(want)
                        if self.address is None:
                            self.next_try = time.time() + backoff.delay(failures)
                elif want is not None and self.address is None and time.time() >= (self.next_try or 0):
                    await self._bind(want, retry=True)
                    if self.address is None:
                        failures += 1
                        self.next_try = time.time() + backoff.delay(failures)
                left = self.watch_s if self.next_try is None else self.next_try - time.time()
                await asyncio.sleep(max(0.05, min(self.watch_s, left)))
        finally:
            await asyncio.shield(self._close())

    async def _bind(self, listen: str, *, retry: bool = False) -> None:
        host, port = parse_listen(listen)
        try:
            server, thread = await asyncio.to_thread(start_http_server, port, host, self.metrics.registry)
        except OSError as exc:
            why = "address in use" if exc.errno == 98 else (exc.strerror or type(exc).__name__)
            if why != self.error or not retry:  # once per distinct problem, not once per retry
                log.error(
                    "metrics.bind_failed",
                    listen=listen,
                    reason=why,
                    detail="the daemon keeps running; retrying with backoff",
                )
            self.error, self.address = why, None
            return
        self._server, self._thread = server, thread
        bound_host, bound_port = server.server_address[:2]
        shown = f"[{bound_host}]" if ":" in str(bound_host) else str(bound_host)
        self.address, self.error, self.since, self.next_try = f"{shown}:{bound_port}", None, time.time(), None
        log.info("metrics.serving", url=f"http://{self.address}/metrics")

    async def _close(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        self.address = None
        if server is None:
            return
        with logs.survive("metrics.stop_failed"):
            await asyncio.to_thread(server.shutdown)
            server.server_close()
        if thread is not None:
            await asyncio.to_thread(thread.join, 5)
