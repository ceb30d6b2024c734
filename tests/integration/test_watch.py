"""WatchSource on real temp trees with real watchfiles (slow: they wait for the settle time)."""

from __future__ import annotations

import asyncio
import errno
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
import structlog.testing
from sourcerun import SourceRun

from autod.config.settings import WatchSource as WatchConfig
from autod.events import EventKind
from autod.ownwrites import OwnWrites
from autod.sources.watch import WatchSource

pytestmark = pytest.mark.slow

HANG_GUARD_S = 15.0
QUIET_S = 0.8  # observation window for "no event", not a speed assertion


@asynccontextmanager
async def watching(ws: Path, own: OwnWrites | None = None, **kw: object) -> AsyncIterator[SourceRun]:
    awatch = kw.pop("awatch", None)
    cfg = WatchConfig(type="watch", paths=kw.pop("paths", ["src"]), settle_ms=150, **kw)  # type: ignore[arg-type]
    extra = {"awatch": awatch} if awatch else {}
    source = WatchSource(cfg, ws, ws / ".state", own or OwnWrites(), **extra)
    run = SourceRun(source, hang_guard_s=HANG_GUARD_S, quiet_s=QUIET_S)
    task = asyncio.create_task(run.pump())
    try:
        await run.armed()
        yield run
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def workspace(tmp_path: Path, git: bool = False) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("a = 1\n")
    if git:
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        (ws / ".gitignore").write_text("*.log\nbuild/\n")
    return ws


def test_a_save_is_one_event_after_settle(tmp_path):
    ws = workspace(tmp_path)

    async def main() -> None:
        async with watching(ws) as run:
            (ws / "src" / "a.py").write_text("a = 2\n")
            ev = await run.next()
            assert ev.kind is EventKind.FILES_CHANGED and ev.source == "watch:src"
            assert ev.payload["paths"] == ["src/a.py"]
            assert ev.summary == "1 files changed: src/a.py"
            assert await run.quiet() == []

    asyncio.run(main())


def test_burst_of_200_writes_is_one_event(tmp_path):
    ws = workspace(tmp_path)

    async def main() -> None:
        async with watching(ws) as run:
            for i in range(200):
                (ws / "src" / f"m{i:03}.py").write_text(f"x = {i}\n")
                if i % 20 == 0:
                    await asyncio.sleep(0.02)  # a burst spread over time, still inside the settle
            ev = await run.next()
            assert len(ev.payload["paths"]) == 200
            assert ev.summary.startswith("200 files changed: src/m000.py, src/m001.py")
            assert await run.quiet() == []

    asyncio.run(main())


def test_gitignored_state_dir_and_glob_paths_are_ignored(tmp_path):
    ws = workspace(tmp_path, git=True)
    (ws / "src" / ".state").mkdir()

    async def main() -> None:
        async with watching(ws, paths=["."], ignore=["*.tmp"]) as run:
            (ws / "src" / "out.log").write_text("x")
            (ws / "build").mkdir()
            (ws / "build" / "b.o").write_text("x")
            (ws / ".state").mkdir(exist_ok=True)
            (ws / ".state" / "queue.db").write_text("x")
            (ws / ".autod").mkdir()
            (ws / ".autod" / "x").write_text("x")
            (ws / "src" / "scratch.tmp").write_text("x")
            assert await run.quiet() == []
            (ws / "src" / "a.py").write_text("a = 3\n")
            ev = await run.next()
            assert ev.payload["paths"] == ["src/a.py"]

    asyncio.run(main())


def test_own_write_is_ignored_but_a_later_human_edit_is_seen(tmp_path):
    ws = workspace(tmp_path)
    own = OwnWrites()
    target = ws / "src" / "a.py"

    async def main() -> None:
        async with watching(ws, own=own) as run:
            data = b"a = 'autod'\n"
            own.record(target, data)
            target.write_bytes(data)
            assert await run.quiet() == []
            target.write_text("a = 'human'\n")
            assert (await run.next()).payload["paths"] == ["src/a.py"]

    asyncio.run(main())


def test_deleted_and_recreated_root_recovers(tmp_path):
    ws = workspace(tmp_path)

    async def main() -> None:
        async with watching(ws) as run:
            shutil.rmtree(ws / "src")
            gone = await run.next()
            assert "src/a.py" in gone.payload["paths"]
            # what is tested: a root re-created some time after it went (within the settle time of its
            # deletion, the dead watcher would still be waiting for the batch to settle)
            await asyncio.sleep(0.5)
            (ws / "src").mkdir()
            (ws / "src" / "new.py").write_text("n = 1\n")
            back = await run.next()
            assert back.payload["paths"] == ["src/new.py"]
            await run.armed()  # cleared before `back` was reported, set again once a new watcher is up
            (ws / "src" / "new.py").write_text("n = 2\n")  # the re-armed watcher sees edits again
            assert (await run.next()).payload["paths"] == ["src/new.py"]

    asyncio.run(main())


def test_watch_limit_falls_back_to_polling_with_one_warning(tmp_path):
    ws = workspace(tmp_path)
    calls: list[bool] = []
    real = __import__("watchfiles").awatch

    def limited_awatch(*paths, **kw):
        calls.append(kw["force_polling"])
        if not kw["force_polling"]:
            raise OSError(errno.ENOSPC, "OS file watch limit reached")
        return real(*paths, **kw)

    async def main() -> None:
        with structlog.testing.capture_logs() as logs:
            async with watching(ws, awatch=limited_awatch) as run:
                # The poller's first snapshot may land after a write on a loaded machine: write
                # (a new size each time) until it reports, which only a working fallback does.
                event = None
                for i in range(20):
                    (ws / "src" / "a.py").write_text(f"a = {'9' * (i + 2)}\n")
                    try:
                        event = await asyncio.wait_for(run.queue.get(), 1.5)
                        break
                    except TimeoutError:
                        continue
                assert event is not None and event.payload["paths"] == ["src/a.py"]
        warnings = [e for e in logs if e["log_level"] == "warning"]
        assert [w["event"] for w in warnings] == ["watch.limit_reached_polling"]
        assert calls[:2] == [False, True]

    asyncio.run(main())


def test_awatch_creates_its_watcher_in_its_first_step(tmp_path, monkeypatch):
    """WatchSource.armed rests on this: watchfiles makes its Rust watcher (and so starts keeping
    changes) synchronously in the first step of awatch's first __anext__. If a watchfiles release
    moves that, this fails, rather than the watch tests turning flaky."""
    import watchfiles.main

    made: list[object] = []
    real = watchfiles.main.RustNotify

    def recording(*args: object) -> object:
        made.append(args)
        return real(*args)

    monkeypatch.setattr(watchfiles.main, "RustNotify", recording)

    async def main() -> None:
        stop = asyncio.Event()
        gen = watchfiles.awatch(tmp_path, stop_event=stop)
        first = asyncio.ensure_future(anext(gen, None))
        await asyncio.sleep(0)
        assert len(made) == 1 and not first.done()
        stop.set()
        assert await asyncio.wait_for(first, HANG_GUARD_S) is None

    asyncio.run(main())
