"""Named, bounded worker pools, so `top -H` and /proc show whose thread is whose, and a bounded stop.

Python (before 3.14) leaves every OS thread named after the interpreter ("python"); each pool here
names its workers at the OS level (Linux `prctl(PR_SET_NAME)`; elsewhere only Python sees names), which is
also how the soak test tells a bounded pool growing on demand from a leak.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn, TypeVar

from autod.native import libc

T = TypeVar("T")
PR_SET_NAME = 15
# the daemon's default executor (asyncio.to_thread): file scans, journal writes, git, config loads
IO_POOL = "autod-io"
IO_POOL_WORKERS = 4


def _name_thread(name: str) -> None:
    lib = libc()
    if lib is not None and hasattr(lib, "prctl"):  # the name is cosmetic: no prctl, no name
        lib.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def named_pool(name: str, max_workers: int) -> ThreadPoolExecutor:
    """A ThreadPoolExecutor whose worker threads carry `name` (at most 15 bytes) in the OS."""
    return ThreadPoolExecutor(
        max_workers=max_workers, thread_name_prefix=name, initializer=_name_thread, initargs=(name,)
    )


# how long a stop waits for worker threads to finish once the loop is done; a thread still blocked
# then (in a system call a check provoked, say) is left behind and the process exits without it
STOP_JOIN_S = 10.0


def run_bounded(main: Coroutine[Any, Any, T], *, join_s: float = STOP_JOIN_S) -> tuple[T, list[str]]:
    """`asyncio.run(main)`, but worker threads are waited for at most `join_s` seconds in all.

    `asyncio.run` (3.11) joins the default executor without a timeout, and concurrent.futures joins
    every pool thread at interpreter exit: one thread blocked for ever keeps a stopped daemon alive.
    Returns main's result and the names of the threads still running after the wait; the caller
    exits with `exit_now` when there are any.
    """
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        result = loop.run_until_complete(main)
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()  # shuts the default executor down without waiting for its threads
    return result, join_workers(join_s)


def join_workers(join_s: float) -> list[str]:
    """Join every other non-daemon thread within `join_s` seconds in all; the names of those left."""
    deadline = time.monotonic() + join_s
    left: list[str] = []
    for thread in threading.enumerate():
        if thread is threading.current_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            left.append(thread.name)
    return left


def exit_now(code: int) -> NoReturn:
    """Flush the logs and standard streams, then exit without joining threads (they are stuck)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
