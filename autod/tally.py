"""Where a cycle's time went: the LLM's requests and the checks' runs, counted where they happen.

A cycle opens a tally (`counting()`); `spend()` calls deep in the planner and the check runner add to
the tally of the task they run in (a context variable, so concurrent tasks never mix). What is left of
the cycle's wall time is autod's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_current: ContextVar[dict[str, int] | None] = ContextVar("autod_tally", default=None)


def spend(kind: str, ms: float) -> None:
    """Add `ms` to `kind` (`model`, `checks`) of the running cycle's tally, if there is one."""
    tally = _current.get()
    if tally is not None:
        tally[kind] = tally.get(kind, 0) + int(ms)


@contextlib.contextmanager
def counting() -> Iterator[dict[str, int]]:
    """A fresh tally for the code run inside the block (and the tasks it starts)."""
    tally: dict[str, int] = {}
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)
