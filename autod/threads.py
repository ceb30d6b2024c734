"""Named, bounded worker pools, so `top -H` and /proc show whose thread is whose.

Python (before 3.14) leaves every OS thread named after the interpreter ("python"); each pool here
names its workers at the OS level (Linux `prctl(PR_SET_NAME)`; elsewhere only Python sees names), which is
also how the soak test tells a bounded pool growing on demand from a leak.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from autod.native import libc

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
