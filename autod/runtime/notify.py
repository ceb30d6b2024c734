"""sd_notify for systemd: readiness, status, reload/stop notices and the watchdog.

The protocol is one datagram of ``KEY=value`` lines to the AF_UNIX socket named by
``$NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace). Outside systemd the
variable is unset and every call is a cheap no-op, so callers never need to check.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable, Mapping

import structlog

__all__ = ["Notifier"]

log = structlog.get_logger(__name__)


def _address(value: str) -> str | None:
    """The socket address for NOTIFY_SOCKET, or None when it is unset or not a unix socket."""
    if value.startswith("/"):
        return value
    if value.startswith("@") and len(value) > 1:
        return "\0" + value[1:]  # abstract namespace: a leading NUL, no file
    return None  # unset, or a form we do not speak (e.g. vsock: from systemd >= 253)


def _positive_int(value: str | None) -> int | None:
    try:
        number = int(value) if value else 0
    except ValueError:
        return None
    return number if number > 0 else None


class Notifier:
    """Talks to the service manager; every method is safe to call when not under systemd."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._address = _address(env.get("NOTIFY_SOCKET", ""))
        self.enabled: bool = self._address is not None
        self._watchdog_usec = _positive_int(env.get("WATCHDOG_USEC"))
        self._watchdog_pid = _positive_int(env.get("WATCHDOG_PID"))
        self._sock: socket.socket | None = None
        self._failure_logged = False

    def send(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` lines in one datagram; False when disabled or on failure, never raises."""
        if self._address is None or not fields:
            return False
        # A newline inside a value would start a new (bogus) assignment.
        lines = (f"{key.upper()}={str(value).replace(chr(10), ' ')}" for key, value in fields.items())
        message = "\n".join(lines)
        try:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                # A full receive queue must not stall the event loop: drop the message instead.
                sock.setblocking(False)
                self._sock = sock
            self._sock.sendto(message.encode(), self._address)
        except OSError as exc:
            if not self._failure_logged:
                self._failure_logged = True
                log.warning("daemon.sd_notify_failed",
                            socket=self._address.replace("\0", "@"), error=str(exc))
            return False
        return True

    def ready(self, status: str) -> None:
        """Startup finished (READY=1), with a status line for `systemctl status`."""
        self.send(READY=1, STATUS=status)

    def status(self, text: str) -> None:
        """Update the one-line status shown by `systemctl status`."""
        self.send(STATUS=text)

    def extend_timeout(self, seconds: float) -> None:
        """Start-up (or stop) is still making progress: give it `seconds` more (EXTEND_TIMEOUT_USEC)."""
        self.send(EXTEND_TIMEOUT_USEC=max(1, int(seconds * 1_000_000)))

    def stopping(self) -> None:
        """Shutdown has begun."""
        self.send(STOPPING=1, STATUS="stopping")

    def reloading(self) -> None:
        """A reload has begun; READY=1 ends it. MONOTONIC_USEC is required by Type=notify-reload."""
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self.send(RELOADING=1, MONOTONIC_USEC=usec)

    def watchdog(self) -> None:
        """Feed the watchdog once."""
        self.send(WATCHDOG=1)

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between pings (half of WatchdogSec), or None when no watchdog is ours to feed."""
        if not self.enabled or self._watchdog_usec is None:
            return None
        # WATCHDOG_PID names the process systemd watches; children inherit the variables.
        if self._watchdog_pid is not None and self._watchdog_pid != os.getpid():
            return None
        return self._watchdog_usec / 2 / 1_000_000

    async def watchdog_loop(self, healthy: Callable[[], bool] | None = None) -> None:
        """Ping WATCHDOG=1 from the event loop every interval while ``healthy()`` holds; runs until cancelled.

        The pings deliberately come from the loop, not a thread: a blocked or hung loop stops
        them, and systemd then kills and restarts the service.
        """
        interval = self.watchdog_interval
        if interval is None:
            return
        while True:
            await asyncio.sleep(interval)
            try:
                ok = healthy is None or bool(healthy())
            except Exception as exc:  # a broken probe is an unhealthy daemon, not a dead loop
                log.warning("daemon.watchdog_probe_failed", error=repr(exc))
                ok = False
            if ok:
                self.watchdog()

    def close(self) -> None:
        """Close the socket (a later send reopens it)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
