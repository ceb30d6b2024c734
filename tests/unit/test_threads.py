"""Named pools: the OS sees each worker's name (what `top -H` and the soak census read), bounded."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from autod.threads import named_pool


def os_thread_names() -> list[str]:
    names = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended while we looked
            names.append(Path(task, "comm").read_text().strip())
    return names


def gone(name: str, hang_guard_s: float = 10.0) -> bool:
    """True once no OS thread carries `name`: a joined thread may take a moment to leave /proc."""
    deadline = time.monotonic() + hang_guard_s
    while name in os_thread_names():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_carry_the_pool_name_in_the_os_and_never_exceed_the_bound():
    gate = threading.Barrier(3)  # two workers and this thread meet, so both workers exist at once
    pool = named_pool("autod-test", 2)
    try:
        futures = [pool.submit(gate.wait, 10) for _ in range(2)]
        gate.wait(10)
        for f in futures:
            f.result(10)
        assert os_thread_names().count("autod-test") == 2
        for f in [pool.submit(lambda: None) for _ in range(50)]:
            f.result(10)
        assert os_thread_names().count("autod-test") == 2
    finally:
        pool.shutdown(wait=True)
    assert gone("autod-test"), os_thread_names()


def test_a_long_name_is_cut_to_the_kernels_15_bytes_not_refused():
    pool = named_pool("autod-a-very-long-pool-name", 1)
    try:
        assert pool.submit(lambda: 42).result(10) == 42
        if sys.platform.startswith("linux"):
            assert "autod-a-very-lo" in os_thread_names()
    finally:
        pool.shutdown(wait=True)
