"""A followed log under the workspace (a check writes there) is never read through a link: generated
placements of a link (the log itself, any directory on its way) to a file or a directory outside,
swapped in before the follower opens the log or while it follows it. Without the control every one
reads the outside file. Outside the workspace the operator's own links are followed, as before."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
from sourcerun import SourceRun

from autod.config.settings import LogtailSource as LogtailConfig
from autod.sources.follower import FileFollower
from autod.sources.logtail import LogtailSource

SECRET = b"OUTSIDE-THE-WORKSPACE 4242\n"


def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "build" / "logs").mkdir(parents=True)
    (outside / "logs").mkdir(parents=True)
    (outside / "logs" / "app.log").write_bytes(SECRET)
    (outside / "app.log").write_bytes(SECRET)
    log = ws / "build" / "logs" / "app.log"
    log.write_bytes(b"started\n")
    return ws, outside, log


def _swap(ws: Path, outside: Path, where: str) -> None:
    """Put a link to `outside` where `where` (a component of build/logs/app.log) was."""
    if where == "the log":
        os.unlink(ws / "build" / "logs" / "app.log")
        os.symlink(outside / "app.log", ws / "build" / "logs" / "app.log")
    elif where == "its directory":
        (ws / "build" / "logs").rename(ws / "build" / "old")
        os.symlink(outside / "logs", ws / "build" / "logs")
    else:  # its directory's directory
        (ws / "build").rename(ws / "old")
        (outside / "build").mkdir(exist_ok=True)
        if not (outside / "build" / "logs").exists():
            os.symlink(outside / "logs", outside / "build" / "logs")
        os.symlink(outside / "build", ws / "build")


@pytest.mark.parametrize("where", ["the log", "its directory", "its directory's directory"])
@pytest.mark.parametrize("when", ["before the first open", "while following"])
@pytest.mark.parametrize("control", [True, False])
def test_no_link_under_the_workspace_is_followed(tmp_path: Path, where: str, when: str, control: bool
                                                 ) -> None:
    ws, outside, log = _layout(tmp_path)
    follower = FileFollower(log, from_start=True, saved=None, beneath=ws if control else None)
    if when == "before the first open":
        _swap(ws, outside, where)
        got = follower.read()
    else:
        got = follower.read()
        assert got == b"started\n"
        _swap(ws, outside, where)
        got = follower.read() + follower.read()
    follower.close()
    if control:
        assert SECRET not in got, (where, when)
    else:  # the same swap, followed as before this control: the outside file is read
        assert SECRET in got, (where, when)


def test_a_log_outside_the_workspace_is_followed_through_the_operators_links(tmp_path: Path) -> None:
    _, outside, _ = _layout(tmp_path)
    current = tmp_path / "current.log"
    current.symlink_to(outside / "app.log")
    follower = FileFollower(current, from_start=True, saved=None, beneath=None)
    assert follower.read() == SECRET
    follower.close()


def test_a_workspace_reached_through_a_link_still_has_its_log_followed(tmp_path: Path) -> None:
    ws, _, _ = _layout(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(ws, target_is_directory=True)
    follower = FileFollower(alias / "build" / "logs" / "app.log", from_start=True, saved=None, beneath=alias)
    assert follower.read() == b"started\n"
    follower.close()


@pytest.mark.slow
def test_a_logtail_source_on_a_workspace_log_reads_no_link_a_check_put_there(tmp_path: Path) -> None:
    """Through the source, as `type: logtail` runs it: a traceback outside reaches no event."""
    ws, outside, _ = _layout(tmp_path)
    (outside / "app.log").write_text('Traceback (most recent call last):\n  File "x.py", line 3, in f\n'
                                     "ValueError: OUTSIDE-THE-WORKSPACE 4242\n")
    config = LogtailConfig(type="logtail", path="build/logs/app.log", poll_s=0.02)  # type: ignore[call-arg]
    source = LogtailSource(config, ws, tmp_path / "state")

    async def main() -> list[Any]:
        run = SourceRun(source, hang_guard_s=10.0, quiet_s=0.6)
        task = asyncio.create_task(run.pump())
        try:
            await run.armed()
            _swap(ws, outside, "the log")
            return await run.quiet()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    events = asyncio.run(asyncio.wait_for(main(), 60))
    assert not any("4242" in str(e) for e in events), events


def test_a_directory_whose_name_starts_with_two_dots_is_still_beneath_the_workspace(tmp_path: Path) -> None:
    ws, outside, _ = _layout(tmp_path)
    (ws / "..logs").mkdir()
    (ws / "..logs" / "app.log").write_bytes(b"ours\n")
    os.symlink(outside / "app.log", ws / "..logs" / "link.log")
    for name, want in (("app.log", b"ours\n"), ("link.log", b"")):  # read; a link refused
        follower = FileFollower(ws / "..logs" / name, from_start=True, saved=None, beneath=ws)
        assert follower.read() == want, name
        follower.close()
