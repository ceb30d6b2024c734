"""How the work of a parser grows with its input, measured in CPU time of this thread (other processes
on the machine do not count), never against a wall-clock threshold: linear work grows 16-fold from a
2,000- to a 32,000-character input, quadratic work 256-fold; a bound of 64 leaves room for a loaded
machine and is far below the quadratic growth."""

from __future__ import annotations

import time
from collections.abc import Callable

SMALL, LARGE = 2_000, 32_000  # characters
BOUND = 64  # the growth from SMALL to LARGE that linear work stays under
STEP_BOUND = 16  # over four times the length: linear work grows 4-fold, quadratic 16-fold


def cpu_cost(work: Callable[[], object]) -> int:
    """The least CPU time of this thread over a few runs."""
    best = None
    for _ in range(5):
        t0 = time.thread_time_ns()
        work()
        spent = time.thread_time_ns() - t0
        best = spent if best is None else min(best, spent)
        if best > 10**9:
            break  # a second of CPU is measured well enough once
    return max(best or 0, 200_000)  # below 0.2 ms a clock tick would decide the ratio


def per_call(work: Callable[[], object], tries: int = 3, batch_ns: int = 150_000) -> float:
    """The least CPU time of one call of `work`, over `tries` batches of calls that each take at least
    `batch_ns` (work of a few microseconds is called often enough that the clock's tick does not count)."""
    best = None
    reps = 1
    for _ in range(tries):
        while True:
            t0 = time.thread_time_ns()
            for _ in range(reps):
                work()
            spent = time.thread_time_ns() - t0
            if spent >= batch_ns or reps >= 1 << 14:
                break
            reps *= max(2, min(64, batch_ns // max(spent, 1)))
        best = spent / reps if best is None else min(best, spent / reps)
        if spent > 10**9:
            break  # a second of CPU is measured well enough once
    return max(best or 0.0, 1.0)


def growth_of(small: Callable[[], object], large: Callable[[], object], bound: float = BOUND) -> float:
    """CPU time of `large` over that of `small`. The small one is measured a few times (an inflated run
    of it would hide growth), the large one once; a ratio past `bound` is measured again, both sides
    back to back, up to three times, and the least kept: a loaded machine inflates a run, not every
    one, while work that grows too fast does so every time."""
    ratio = per_call(large, tries=1) / per_call(small)
    for _ in range(3):
        if ratio < bound:
            break
        ratio = min(ratio, per_call(large, tries=2) / per_call(small))
    return ratio


def climb(work_at: Callable[[int], Callable[[], object]]) -> float:
    """The growth of `work_at(n)` from SMALL to LARGE characters, climbed in steps of four times the
    length: work that grows too fast is caught at SMALL or at a quarter of LARGE, in milliseconds (a
    cubic pattern at LARGE takes hours). Past a step, the growth to LARGE is told as the square of the
    step's (the same power of the length)."""
    ratio = growth_of(work_at(SMALL // 4), work_at(SMALL), STEP_BOUND)
    if ratio < STEP_BOUND:
        ratio = growth_of(work_at(SMALL), work_at(4 * SMALL), STEP_BOUND)
    if ratio >= STEP_BOUND:
        return ratio * ratio
    return growth_of(work_at(SMALL), work_at(LARGE))
