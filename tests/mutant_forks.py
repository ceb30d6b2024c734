"""Mutants run in forked copies of one pytest session, several at a time (tests/mutants.py uses it).

A `Job` is one mutant: how to make it in the child (compile the changed module, swap the code into
the live function objects) and the tests to run against it, each with its own deadline. `run_all`
keeps up to `jobs` children going at once: the pass is CPU work in separate processes, so on two
cores it takes about half the time. Each child writes its tests' temporary directories under a
directory of its own, which the parent removes when the child is done: thousands of mutants leave
no thousands of directories behind (removing those at the end took half a minute on a busy disk),
and no child scans a directory the others keep growing to number its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_SURVIVED, EXIT_KILLED, EXIT_BROKEN, EXIT_TIMEOUT = 0, 1, 3, 4
STATUS = {EXIT_SURVIVED: "survived", EXIT_KILLED: "killed", EXIT_TIMEOUT: "timeout"}


@dataclass
class Job:
    """One mutant: `make` turns the child's session into the mutant's; `tests` are (item, deadline s)."""

    key: str
    make: Callable[[], None]
    tests: list[tuple[Any, float]]
    budget: float  # for all its tests: past it the parent kills the child (a loop no alarm ends)
    payload: Any = None  # the caller's own record of the job, handed back with its result


@dataclass
class Done:
    """How a job ended: `status` (survived, killed, timeout, broken), the killing test, why broken."""

    job: Job
    status: str
    killer: str | None = None
    detail: str = ""
    seconds: float = 0.0


@dataclass
class _Child:
    job: Job
    pid: int
    read: int
    tmp: Path
    started: float = field(default_factory=time.monotonic)


class PastDeadline(BaseException):
    """Raised in a mutant's test by its deadline's alarm; no `except Exception` of the code swallows it."""


class _Deadline:
    """One test's alarm. Disarmed before the timer is stopped, so an alarm already on its way when the
    test ends raises nothing outside the test; `fired` tells a deadline that Python turned into another
    error (raised in a `__set_name__` of a class pytest's report imports, it is a RuntimeError)."""

    armed = fired = False

    @classmethod
    def handler(cls, signum: int, frame: Any) -> None:
        if cls.armed:
            cls.armed, cls.fired = False, True
            raise PastDeadline("the mutant ran past the test's deadline")

    @classmethod
    def arm(cls, seconds: float) -> None:
        cls.armed, cls.fired = True, False
        signal.setitimer(signal.ITIMER_REAL, seconds)

    @classmethod
    def disarm(cls) -> None:
        cls.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's limit, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def run_all(
    next_job: Callable[[], Job | None], on_done: Callable[[Done], None], *, jobs: int,
    runtestprotocol: Any, tmp_factory: Any, tmp_root: Path,
) -> None:
    """Run every job `next_job` hands out (None: no more), up to `jobs` children at once, in order of
    start; `on_done` hears each as it ends (a job asked for later may use what earlier ones found)."""
    running: list[_Child] = []
    exhausted = False
    serial = 0
    while running or not exhausted:
        while not exhausted and len(running) < max(1, jobs):
            job = next_job()
            if job is None:
                exhausted = True
                break
            serial += 1
            running.append(_start(job, runtestprotocol, tmp_factory, tmp_root / f"m{serial}"))
        for child in list(running):
            done = _poll(child)
            if done is not None:
                running.remove(child)
                on_done(done)
        if running:
            time.sleep(0.002)


def _start(job: Job, runtestprotocol: Any, tmp_factory: Any, tmp: Path) -> _Child:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the mutant: its own process, so nothing it does reaches the next one
        os.close(read)
        code = EXIT_BROKEN
        try:
            os.setpgid(0, 0)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            # pytest's own (private) state: this child's tmp_path directories go under `tmp`
            tmp_factory._basetemp, tmp_factory._given_basetemp = None, tmp
            job.make()
            signal.signal(signal.SIGALRM, _Deadline.handler)
            code = _tests_of(runtestprotocol, job.tests, write)
        except BaseException as exc:  # told to the parent: a broken mutant says why
            with contextlib.suppress(OSError):
                os.write(write, ("B" + "".join(traceback.format_exception(exc))[-2000:]).encode())
        finally:  # anything that escaped the tests leaves EXIT_BROKEN: reported, never a survivor
            os._exit(code)
    os.close(write)
    return _Child(job, pid, read, tmp)


def _poll(child: _Child) -> Done | None:
    """The child's result once it has ended (or been killed past its budget), else None."""
    done, raw = os.waitpid(child.pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(raw)
        status = STATUS.get(code, "broken")
        detail = "" if status != "broken" else f"exit {code}"
    elif time.monotonic() > child.started + child.job.budget:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)
        status, detail = "timeout", ""
    else:
        return None
    with os.fdopen(child.read, "rb") as f:
        said = f.read().decode(errors="replace")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)  # what the tests started and left behind
    shutil.rmtree(child.tmp, ignore_errors=True)
    killer = said[1:] if said.startswith("K") else None
    if said.startswith("B"):
        detail = f"{detail}: {said[1:]}".strip(": ")
    return Done(child.job, status, killer, detail, time.monotonic() - child.started)


def _tests_of(runtestprotocol: Any, tests: list[tuple[Any, float]], write: int) -> int:
    """Run the tests in the mutant's process: its exit code, and the killing test's id on `write`."""
    for item, limit in tests:
        try:
            _Deadline.arm(limit)
            try:
                reports = runtestprotocol(item, log=False, nextitem=None)
            finally:
                _Deadline.disarm()
        except BaseException:  # past the deadline outside the test's own code (setup, pytest itself)
            if _Deadline.fired:
                return EXIT_TIMEOUT
            raise
        if any(r.failed for r in reports):
            os.write(write, ("K" + item.nodeid).encode())
            return EXIT_KILLED
    return EXIT_SURVIVED
