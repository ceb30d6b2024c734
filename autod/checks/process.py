"""One check's process: started in its own session, output read from our own pipe and capped (head
and tail), a deadline, and nothing it started left alive afterwards.

What "nothing left alive" rests on depends on the wrapper `autod.checks.run` puts in front of the
command: under bwrap, the check's PID namespace (its init exits with the command and the kernel
kills the rest); without bwrap, `autod/checks/reaper.py`, a child subreaper that kills every descendant,
`setsid` and double-forked ones included. Here, the process group is killed on top, as a backstop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autod import logs
from autod.safety.filemodes import workspace_umask

KILL_GRACE_S = 3.0  # SIGTERM -> SIGKILL; longer than the reaper's own grace, so it can sweep first


@dataclass
class Finished:
    exit_code: int  # 124 on timeout; negative: killed by that signal
    output: bytes
    truncated: bool
    timed_out: bool
    duration_ms: int


class CannotStart(Exception):
    """The wrapper itself (bwrap, the reaper's interpreter) could not be executed."""


# The session leaders (bwrap, or the reaper) of the checks running now: the control socket refuses
# any peer that descends from one or shares its session (autod.control.peers).
_running: set[int] = set()


def running_sessions() -> frozenset[int]:
    """The PIDs of the checks' session leaders running now."""
    return frozenset(_running)


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    """Keep the head and the tail of the output (the tail has pytest's summary)."""
    head = bytearray()
    tail = bytearray()
    truncated = False
    half = limit // 2
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        if len(head) < half:
            take = half - len(head)
            head += chunk[:take]
            chunk = chunk[take:]
        if chunk:
            tail += chunk
            if len(tail) > limit - half:
                truncated = True
                del tail[: len(tail) - (limit - half)]
    if truncated:
        return bytes(head) + b"\n... [output truncated] ...\n" + bytes(tail), True
    return bytes(head) + bytes(tail), False


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _pipe_reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(fd, "rb", buffering=0)
    )
    return stream, transport


async def run_session(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    output_limit: int,
    pass_fds: Sequence[int] = (),
) -> Finished:
    """Run argv in a new session and wait for it within `timeout_s`. Raises CannotStart only when
    argv[0] itself cannot be executed; the command's own failure is an exit code."""
    start = time.monotonic()
    # Our own pipe, not stdout=PIPE: asyncio's Process.wait() also waits for its pipes to close, so
    # a background child that inherited stdout would make a passing check look hung.
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # own session and process group: a timeout reaches its children
            pass_fds=tuple(pass_fds),  # the recorder's channel (autod.checks.heard), nothing else
            umask=workspace_umask(),  # files a check writes in the workspace get its usual modes
        )
    except OSError as exc:
        os.close(read_fd)
        raise CannotStart(f"{type(exc).__name__}: {exc.strerror or exc}: {argv[0]}") from None
    finally:
        os.close(write_fd)
    _running.add(proc.pid)
    try:
        return await _finish(proc, read_fd, timeout_s, output_limit, start)
    finally:
        _running.discard(proc.pid)


async def _finish(
    proc: asyncio.subprocess.Process, read_fd: int, timeout_s: float, output_limit: int, start: float
) -> Finished:
    stream, transport = await _pipe_reader(read_fd)
    reader = asyncio.ensure_future(_read_capped(stream, output_limit))
    try:
        timed_out = await _wait(proc, timeout_s, reader)
        # Grandchildren may hold the pipe open after the leader exits: kill the group, bound the read.
        _kill_group(proc.pid, signal.SIGKILL)
        try:
            data, truncated = await asyncio.wait_for(reader, timeout=KILL_GRACE_S)
        except TimeoutError:
            data, truncated = b"", True
    finally:
        transport.close()
    code = proc.returncode if proc.returncode is not None else -1
    return Finished(
        exit_code=124 if timed_out else code,
        output=data,
        truncated=truncated,
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - start) * 1000),
    )


async def _wait(
    proc: asyncio.subprocess.Process, timeout_s: float, reader: asyncio.Future[tuple[bytes, bool]]
) -> bool:
    """Wait within the deadline; on timeout or cancellation stop the session. True if it timed out."""
    try:
        await asyncio.wait_for(proc.wait(), timeout=timeout_s)
        return False
    except TimeoutError:
        await _stop(proc)
        return True
    except asyncio.CancelledError:
        # SIGTERM first even now: the reaper needs a moment to kill what escaped the group.
        with logs.survive("check.stop_failed", pid=proc.pid):
            await asyncio.shield(_stop(proc))
        reader.cancel()
        raise


async def _stop(proc: asyncio.subprocess.Process) -> None:
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S)
    except TimeoutError:
        _kill_group(proc.pid, signal.SIGKILL)
        await proc.wait()
