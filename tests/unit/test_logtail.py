"""The log tailer against real files: partial lines, truncation, rotation, restarts, garbage."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sourcerun import SourceRun

from autod.config.settings import LogtailSource as LogtailConfig
from autod.events import EventKind
from autod.sources.follower import KEEP_OF_LONG_LINE, MAX_LINE, FileFollower
from autod.sources.logtail import LogtailSource, state_file

HANG_GUARD_S = 10.0
QUIET_S = 0.6  # how long "nothing happens" is watched for; not a speed assertion


def err(name: str) -> str:
    return f"src/{name}.c:5:12: error: '{name}' undeclared\n"


@asynccontextmanager
async def tailing(tmp_path: Path, **cfg: object) -> AsyncIterator[SourceRun]:
    config = LogtailConfig(type="logtail", path="build.log", poll_s=0.02, **cfg)  # type: ignore[arg-type]
    source = LogtailSource(config, tmp_path, tmp_path / "state")
    run = SourceRun(source, hang_guard_s=HANG_GUARD_S, quiet_s=QUIET_S)
    task = asyncio.create_task(run.pump())
    try:
        await run.armed()  # it took its first look at the file
        yield run
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def append(path: Path, text: str | bytes) -> None:
    with open(path, "ab") as f:
        f.write(text.encode() if isinstance(text, str) else text)


async def until_saved(sf: Path, offset: int) -> None:
    while True:
        try:
            if json.loads(sf.read_text())["offset"] >= offset:
                return
        except (OSError, ValueError, KeyError):
            pass
        await asyncio.sleep(0.01)


def run_async(fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(fn(), 60))


@pytest.mark.slow
def test_event_shape_and_partial_line_held_until_newline(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("")

    async def main() -> None:
        async with tailing(tmp_path) as run:
            append(log, "src/x.c:5:12: error: bo")
            assert await run.quiet() == []
            append(log, "om\n")
            ev = await run.next()
            assert ev.kind is EventKind.BUILD_FAILED
            assert ev.source == "logtail:build.log"
            assert ev.summary == "gcc: src/x.c:5: error: boom"
            assert ev.payload["locations"] == [{"path": "src/x.c", "line": 5}]
            assert ev.payload["detector"] == "gcc" and ev.payload["log_path"] == str(log)

    run_async(main)


@pytest.mark.slow
def test_truncation_reopens_at_start(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("x" * 5000 + "\n")

    async def main() -> None:
        async with tailing(tmp_path) as run:
            append(log, err("a"))
            assert "'a'" in (await run.next()).summary
            log.write_text(err("b"))  # truncate and write (shorter than before)
            assert "'b'" in (await run.next()).summary

    run_async(main)


@pytest.mark.slow
def test_copytruncate_rotation_reads_new_content_from_zero(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("noise\n" * 1000)

    async def main() -> None:
        async with tailing(tmp_path) as run:
            (tmp_path / "build.log.1").write_bytes(log.read_bytes())  # copy ...
            os.truncate(log, 0)  # ... then truncate in place: same inode
            await asyncio.sleep(0.2)
            append(log, err("after"))
            assert "'after'" in (await run.next()).summary

    run_async(main)


def test_rotation_by_rename_reads_old_file_to_end_then_new(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("")

    async def main() -> None:
        async with tailing(tmp_path) as run:
            with open(log, "a") as old_writer:
                old_writer.write(err("b"))
                old_writer.flush()
                os.rename(log, tmp_path / "build.log.1")
                old_writer.write(err("c"))  # the writer still appends to the renamed file
                old_writer.flush()
                log.write_text(err("d"))
            got = [(await run.next()).summary for _ in range(3)]
            assert ["'b'" in got[0], "'c'" in got[1], "'d'" in got[2]] == [True, True, True]

    run_async(main)


@pytest.mark.slow
def test_delete_and_recreate_is_followed(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("start\n")

    async def main() -> None:
        async with tailing(tmp_path) as run:
            log.unlink()
            await asyncio.sleep(0.15)
            log.write_text(err("new"))
            assert "'new'" in (await run.next()).summary

    run_async(main)


@pytest.mark.slow
def test_file_absent_at_start_is_waited_for_and_read_from_its_start(tmp_path):
    log = tmp_path / "build.log"

    async def main() -> None:
        async with tailing(tmp_path) as run:
            await asyncio.sleep(0.1)
            log.write_text(err("late"))
            assert "'late'" in (await run.next()).summary

    run_async(main)


@pytest.mark.slow
def test_starts_at_end_so_old_content_is_not_replayed(tmp_path):
    log = tmp_path / "build.log"
    log.write_text(err("old"))

    async def main() -> None:
        async with tailing(tmp_path) as run:
            assert await run.quiet() == []
            append(log, err("fresh"))
            assert "'fresh'" in (await run.next()).summary

    run_async(main)


def test_from_start_reads_existing_content(tmp_path):
    log = tmp_path / "build.log"
    log.write_text(err("old"))

    async def main() -> None:
        async with tailing(tmp_path, from_start=True) as run:
            assert "'old'" in (await run.next()).summary

    run_async(main)


@pytest.mark.slow
def test_position_remembered_across_restart(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("")

    async def main() -> None:
        sf = state_file(tmp_path / "state", log)
        async with tailing(tmp_path) as run:
            append(log, err("first"))
            assert "'first'" in (await run.next()).summary
            # the position is saved after the chunk's events were handed on (at-least-once)
            await asyncio.wait_for(until_saved(sf, log.stat().st_size), HANG_GUARD_S)
        append(log, err("while_down"))  # written while autod is stopped
        saved = json.loads(sf.read_text())
        assert saved["inode"] == log.stat().st_ino
        async with tailing(tmp_path) as run:
            assert "'while_down'" in (await run.next()).summary
            assert await run.quiet() == []  # "first" is not replayed

    run_async(main)


@pytest.mark.slow
def test_traceback_written_in_two_writes_is_one_event(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("")
    head = 'Traceback (most recent call last):\n  File "src/app.py", line 3, in <module>\n'

    async def main() -> None:
        async with tailing(tmp_path) as run:
            append(log, head)
            await asyncio.sleep(0.05)
            append(log, "    run()\nValueError: boom\n")
            ev = await run.next()
            assert ev.summary == "python: ValueError: boom (at src/app.py:3)"
            assert "Traceback" in ev.payload["excerpt"]
            # the second half arriving well after the settle time is still the same block
            append(log, head.replace("line 3", "line 9"))
            await asyncio.sleep(0.5)
            append(log, "    run()\nKeyError: 'k'\n")
            ev = await run.next()
            assert ev.summary == "python: KeyError: 'k' (at src/app.py:9)"
            assert await run.quiet() == []

    run_async(main)


def test_huge_line_and_invalid_utf8_do_not_crash_and_stay_bounded(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("")

    async def main() -> None:
        async with tailing(tmp_path) as run:
            block = b"A" * (1 << 20)
            for _ in range(10):  # a 10 MB line written in ten pieces
                append(log, block)
            append(log, b"\n\xff\xfe\x00\x80garbage\xc3\n")
            append(log, err("after_garbage"))
            assert "'after_garbage'" in (await run.next()).summary

    run_async(main)


def test_follower_cuts_a_long_line_to_its_head(tmp_path):
    log = tmp_path / "build.log"
    log.write_bytes(b"B" * (10 << 20) + b"\nshort\n")
    follower = FileFollower(log, from_start=True, saved=None)
    out = b""
    for _ in range(30):
        out += follower.read()
        assert len(follower._pending) <= MAX_LINE  # memory stays bounded while reading
    lines = out.split(b"\n")
    assert len(lines[0]) < KEEP_OF_LONG_LINE + 100 and lines[0].endswith(b"line truncated]")
    assert lines[1] == b"short"
    follower.close()
