"""The memory thread: one daemon thread that runs store jobs in order, each under a deadline.

chromadb's embedded client is not meant for concurrent writers, and one thread also makes a
lesson's de-duplication (query, then update) atomic in-process, so every store job runs here.
Unlike a ThreadPoolExecutor, a job that never returns (a Chroma server that was SIGSTOPped, a
socket that hangs) does not hold anything hostage: the caller's deadline fires, the worker is
*abandoned* (nobody waits for it, not even interpreter exit, since its thread is a daemon
thread), and the next connection gets a fresh worker. The stuck thread ends on its own when its
call returns (the Chroma HTTP client has a timeout too) and then finds its queue closed.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any, TypeVar

from autod.threads import _name_thread

T = TypeVar("T")

THREAD_NAME = "autod-memory"


class StoreTimeout(TimeoutError):
    """A memory store job outlived its deadline; its worker is abandoned."""


class Worker(Executor):
    """A one-thread executor whose thread is a daemon thread and can be left behind."""

    def __init__(self, name: str = THREAD_NAME) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._closed = False
        self.abandoned = False
        self._thread = threading.Thread(target=self._loop, args=(name,), name=name, daemon=True)
        self._thread.start()

    def _loop(self, name: str) -> None:
        _name_thread(name)
        while True:
            item = self._jobs.get()
            if item is None:
                return
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as exc:  # handed to the waiter, as a ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._closed:
            raise RuntimeError("the memory worker is closed")
        future: Future[T] = Future()
        self._jobs.put((future, partial(fn, *args, **kwargs)))
        return future

    async def run(self, fn: Callable[..., T], *args: Any, timeout: float, **kwargs: Any) -> T:
        """Run fn on the thread; raise StoreTimeout (and abandon this worker) past the deadline.

        The deadline counts from submission: jobs are short (a batch, a query, a page of a prune),
        so waiting behind one is part of the call's cost.
        """
        future = asyncio.wrap_future(self.submit(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self.abandon()
            name = getattr(fn, "__name__", type(fn).__name__)
            raise StoreTimeout(f"memory store call {name} took longer than {timeout:g} s") from None

    @property
    def alive(self) -> bool:
        """The thread still runs (an abandoned one: its stuck job has not returned yet)."""
        return self._thread.is_alive()

    def abandon(self) -> None:
        """Give up on the thread: queued jobs are cancelled, the running one is left to finish alone."""
        self.abandoned = True
        self.shutdown(wait=False, cancel_futures=True)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if not self._closed:
            self._closed = True
            if cancel_futures:
                while True:
                    try:
                        item = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            self._jobs.put(None)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()
