"""Every read of a file a check or the workspace can plant goes through the one safe read, and a stop
never waits without bound for a worker thread that is stuck."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autod.localize.spectrum import _load
from autod.ownwrites import OwnWrites
from autod.safety.boundary import Boundary
from autod.threads import run_bounded
from autod.transcripts import TranscriptStore


def returns_without_blocking(call: Callable[[], Any], *, daemon: bool = True) -> Any:
    """call()'s result; fails when it is still blocked (on a FIFO no writer will ever open)."""
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(call()), daemon=daemon)
    t.start()
    t.join(30)  # a deadlock detector, not a speed bound: a read that blocks never returns at all
    assert not t.is_alive(), "the read blocked on a named pipe"
    return box[0]


def test_a_fifo_for_the_line_recorders_result_is_no_result(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "spectrum.json")
    assert returns_without_blocking(lambda: _load(tmp_path / "spectrum.json")) is None


def test_a_fifo_in_the_workspace_reads_as_no_text(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "mod.py")
    boundary = Boundary(ws, tmp_path / "state", ())
    assert returns_without_blocking(lambda: boundary.read_text("mod.py")) is None


def test_a_file_autod_wrote_swapped_for_a_fifo_is_not_its_own(tmp_path: Path) -> None:
    p = tmp_path / "mod.py"
    own = OwnWrites()
    own.record(p, b"x = 1\n")
    os.mkfifo(p)
    assert returns_without_blocking(lambda: own.is_own(p)) is False


def test_a_transcript_swapped_for_a_fifo_reads_as_empty(tmp_path: Path) -> None:
    transcripts = TranscriptStore(tmp_path)
    transcripts.dir.mkdir()
    os.mkfifo(transcripts.path("abcdef12"))
    assert returns_without_blocking(lambda: transcripts.read("abcdef12")) == []


def test_a_worker_thread_stuck_at_the_stop_is_left_behind_not_joined() -> None:
    release = threading.Event()
    started = threading.Event()
    worker: list[str] = []

    def stuck_call() -> None:  # stuck until released, like an open() of a FIFO
        worker.append(threading.current_thread().name)
        started.set()
        release.wait()

    async def main() -> str:
        loop = asyncio.get_running_loop()
        loop.run_in_executor(None, stuck_call)
        await asyncio.to_thread(started.wait, 30)
        return "stopped"

    try:
        # a thread inherits daemon-ness from the thread that starts it: the daemon's pool workers are
        # not daemon threads, so neither is the thread that runs this stop
        result, stuck = returns_without_blocking(lambda: run_bounded(main(), join_s=0.0), daemon=False)
    finally:
        release.set()
    # other tests in this process may leave threads of their own running: the stuck worker is the
    # one this stop must name, and the stop returned without waiting for it
    assert result == "stopped" and worker and worker[0] in stuck


def test_a_fifo_at_a_tailed_log_path_is_not_waited_on(tmp_path: Path) -> None:
    from autod.sources.follower import FileFollower

    os.mkfifo(tmp_path / "build.log")
    follower = FileFollower(tmp_path / "build.log", from_start=True, saved=None)
    assert returns_without_blocking(follower.read) == b""
