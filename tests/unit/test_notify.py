"""Notifier: the sd_notify datagrams a real service manager would receive, and the watchdog."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from autod.runtime.notify import Notifier


class FakeManager:
    """The service manager's end: a bound AF_UNIX datagram socket we read from."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.setblocking(False)

    def drain(self) -> list[dict[str, str]]:
        """Every datagram received so far, each parsed into its KEY=value fields."""
        out = []
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                return out
            out.append(dict(line.split("=", 1) for line in data.decode().split("\n")))

    def one(self) -> dict[str, str]:
        [message] = self.drain()
        return message


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[tuple[FakeManager, str]]:
    path = tmp_path / "notify.sock"
    fake = FakeManager(str(path))
    yield fake, str(path)
    fake.sock.close()


def test_ready_sends_ready_and_status_in_one_datagram(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path})
    assert notifier.enabled
    notifier.ready("watching /srv/repo")
    assert fake.one() == {"READY": "1", "STATUS": "watching /srv/repo"}


def test_status_and_stopping_reach_the_socket(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path})
    notifier.status("cycle 3: plan")
    assert fake.one() == {"STATUS": "cycle 3: plan"}
    notifier.stopping()
    assert fake.one()["STOPPING"] == "1"


def test_reloading_carries_the_current_monotonic_clock(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path})
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    notifier.reloading()
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    message = fake.one()
    assert message["RELOADING"] == "1"
    assert before <= int(message["MONOTONIC_USEC"]) <= after


def test_newline_in_a_value_cannot_inject_another_assignment(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    Notifier({"NOTIFY_SOCKET": path}).status("line one\nREADY=1")
    assert fake.one() == {"STATUS": "line one READY=1"}


def test_abstract_socket_name_is_sent_with_a_leading_nul() -> None:
    name = f"autod-test-{uuid.uuid4().hex}"
    fake = FakeManager("\0" + name)
    try:
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.send(READY=1) is True
        assert fake.one() == {"READY": "1"}
    finally:
        fake.sock.close()


def test_without_notify_socket_everything_is_a_quiet_no_op() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert notifier.send(READY=1) is False
    notifier.ready("x")
    notifier.watchdog()
    assert notifier.watchdog_interval is None
    asyncio.run(asyncio.wait_for(notifier.watchdog_loop(), timeout=5))  # returns at once


def test_send_failure_returns_false_and_logs_only_once(tmp_path: Path) -> None:
    notifier = Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens.sock")})
    with capture_logs() as logs:
        assert notifier.send(READY=1) is False
        assert notifier.send(STATUS="again") is False
    assert len([entry for entry in logs if entry["log_level"] == "warning"]) == 1


def test_watchdog_interval_is_half_of_watchdog_usec_for_our_pid(manager: tuple[FakeManager, str]) -> None:
    _, path = manager
    assert Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "60000000"}).watchdog_interval == 30.0
    mine = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier(mine).watchdog_interval == pytest.approx(0.1)


def test_watchdog_meant_for_another_process_is_not_ours(manager: tuple[FakeManager, str]) -> None:
    _, path = manager
    parent = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": str(os.getpid() + 1)}
    assert Notifier(parent).watchdog_interval is None
    assert Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "bogus"}).watchdog_interval is None


@pytest.mark.slow
def test_watchdog_loop_pings_about_every_half_watchdog_usec(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"})

    async def run() -> tuple[list[dict[str, str]], float]:
        task = asyncio.create_task(notifier.watchdog_loop())
        start = time.monotonic()
        await asyncio.sleep(1.0)
        elapsed = time.monotonic() - start
        task.cancel()
        return fake.drain(), elapsed

    pings, elapsed = asyncio.run(run())
    assert all(p == {"WATCHDOG": "1"} for p in pings)
    # Sleeps only overshoot, so there can never be more than one ping per 0.1 s; a loaded
    # machine may deliver fewer, but not none over a whole second.
    assert 2 <= len(pings) <= elapsed / 0.1 + 1


@pytest.mark.slow
def test_watchdog_loop_stays_silent_while_unhealthy(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000"})
    healthy = False
    probes = 0

    def probe() -> bool:
        nonlocal probes
        probes += 1
        return healthy

    async def run() -> tuple[int, int]:
        nonlocal healthy
        task = asyncio.create_task(notifier.watchdog_loop(probe))
        await asyncio.sleep(0.5)
        while_sick = len(fake.drain())
        healthy = True
        for _ in range(100):  # hang guard: 10 s
            await asyncio.sleep(0.1)
            if fake.drain():
                break
        else:
            raise AssertionError("no ping after the probe turned healthy")
        task.cancel()
        return while_sick, probes

    while_sick, probed = asyncio.run(run())
    assert probed >= 2  # the probe was consulted, and said no
    assert while_sick == 0


@pytest.mark.slow
def test_watchdog_loop_treats_a_raising_probe_as_unhealthy(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000"})

    def probe() -> bool:
        raise RuntimeError("db locked")

    async def run() -> None:
        task = asyncio.create_task(notifier.watchdog_loop(probe))
        await asyncio.sleep(0.4)
        assert not task.done()  # the loop survives its probe
        task.cancel()

    asyncio.run(run())
    assert fake.drain() == []


@pytest.mark.slow
def test_watchdog_pings_stop_while_the_event_loop_is_blocked(manager: tuple[FakeManager, str]) -> None:
    fake, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000"})  # a ping every 0.05 s

    async def hog() -> list[dict[str, str]]:
        fake.drain()
        time.sleep(0.6)  # a blocking call on the loop: twelve ping intervals go by
        return fake.drain()

    async def run() -> tuple[int, list[dict[str, str]], int]:
        task = asyncio.create_task(notifier.watchdog_loop())
        await asyncio.sleep(0.3)
        before = len(fake.drain())
        during = await asyncio.create_task(hog())
        after = 0
        for _ in range(100):  # hang guard: 5 s
            await asyncio.sleep(0.05)
            after += len(fake.drain())
            if after:
                break
        task.cancel()
        return before, during, after

    before, during, after = asyncio.run(run())
    assert before >= 1  # pings were flowing
    assert during == []  # a thread would have kept pinging; the loop could not
    assert after >= 1  # and they resume once the loop is free
