"""Run configured checks, and only those: timeout, output cap, whole process group killed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autod.config import CheckConfig

KILL_GRACE_S = 3.0


@dataclass
class CheckResult:
    name: str
    exit_code: int
    output: str
    duration_ms: int
    timed_out: bool = False
    truncated: bool = False
    # Set when the check could not start at all (program not found, not executable): a configuration
    # error for `status` and `config check`, never a failure for a debug cycle to plan on.
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def record(self) -> dict[str, object]:
        return {"name": self.name, "exit_code": self.exit_code, "duration_ms": self.duration_ms}


class CheckNotConfigured(KeyError):
    pass


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


async def run_check(
    name: str,
    check: CheckConfig,
    cwd: Path,
    *,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    output_dir: Path | None = None,
) -> CheckResult:
    """Run one configured check in `cwd`. Never raises for the command's own failure.

    extra_args are appended to the check's argv and extra_env merged into its environment (autod's
    own additions, e.g. the coverage re-run's plugin); output_dir is a directory outside the
    workspace the check may write to (bound writable under a sandbox; without one, nothing to do).
    """
    argv = [*shlex.split(check.run), *extra_args]
    env = {**os.environ, **check.env, **(extra_env or {})}
    start = time.monotonic()
    # Our own pipe, not stdout=PIPE: asyncio's Process.wait() also waits for its pipes to close, so
    # a background child that inherited stdout would make a passing check look hung.
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # own process group: a timeout kills its children too
        )
    except (FileNotFoundError, PermissionError) as exc:
        os.close(read_fd)
        why = f"cannot start check {name!r}: {type(exc).__name__}: {argv[0]}"
        return CheckResult(name, 127, why, 0, error=why)
    finally:
        os.close(write_fd)
    stream, transport = await _pipe_reader(read_fd)
    reader = asyncio.ensure_future(_read_capped(stream, check.output_limit_kb * 1024))
    try:
        return await _supervise(name, check, proc, reader, start)
    finally:
        transport.close()


async def _pipe_reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(fd, "rb", buffering=0)
    )
    return stream, transport


async def _supervise(
    name: str,
    check: CheckConfig,
    proc: asyncio.subprocess.Process,
    reader: asyncio.Future[tuple[bytes, bool]],
    start: float,
) -> CheckResult:
    """Wait for the check within its timeout, kill its process group, collect its output."""
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout=check.timeout_s)
    except TimeoutError:
        timed_out = True
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S)
        except TimeoutError:
            _kill_group(proc.pid, signal.SIGKILL)
            await proc.wait()
    except asyncio.CancelledError:
        _kill_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        reader.cancel()
        raise
    # Grandchildren may hold the pipe open after the leader exits: kill the group, bound the read.
    _kill_group(proc.pid, signal.SIGKILL)
    try:
        data, truncated = await asyncio.wait_for(reader, timeout=KILL_GRACE_S)
    except TimeoutError:
        data, truncated = b"", True
    output = data.decode("utf-8", "replace")
    if timed_out:
        output += f"\n[autod] check {name!r} timed out after {check.timeout_s:g}s and was killed"
    code = proc.returncode if proc.returncode is not None else -1
    return CheckResult(
        name=name,
        exit_code=124 if timed_out else code,
        output=output,
        duration_ms=int((time.monotonic() - start) * 1000),
        timed_out=timed_out,
        truncated=truncated,
    )
