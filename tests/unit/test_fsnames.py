"""File names that are not UTF-8 (autod.fsnames), over generated names: every byte 0x80-0xff and random
byte strings, mixed with valid names. The walk and the watch source never raise and never drop a valid
name, and leave out each other one with one log line naming it escaped; every encoder autod writes
through (the state db, the log file and stderr, git's stdin) takes every name autod can hold."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from autod import fsnames, logs
from autod.act.edits import FileChange
from autod.config.settings import WatchSource as WatchConfig
from autod.git import ops
from autod.ownwrites import OwnWrites
from autod.safety import safejson
from autod.sources import watch
from autod.sources.watch import WatchSource
from autod.stores.state import State
from autod.walk import walk

EVERY_HIGH_BYTE = [bytes([b]) for b in range(0x80, 0x100)]


def _random_names(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        raw = bytes(rng.choice([*range(1, 0x2F), *range(0x30, 0x100)]) for _ in range(rng.randrange(1, 12)))
        out.append(raw if raw not in (b".", b"..") else b"x" + raw)
    return out


def _bad_names() -> list[bytes]:
    """Names that are not UTF-8: gen<byte>.py for every byte 0x80-0xff, and random ones."""
    names = [b"gen" + b + b".py" for b in EVERY_HIGH_BYTE]
    for raw in _random_names(400, seed=7):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            names.append(raw)
    return sorted(set(names))


def _good_names() -> list[bytes]:
    names = [b"ok.py", "café.py".encode(), "日本.txt".encode(), b"a b.py"]
    for raw in _random_names(400, seed=11):
        try:
            raw.decode("utf-8")
            names.append(raw)
        except UnicodeDecodeError:
            continue
    return sorted(set(names))


BAD = _bad_names()
GOOD = _good_names()


def _escaped(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def test_the_generated_names_hold_both_kinds() -> None:
    assert len(BAD) > 300 and len(GOOD) > 20


@pytest.mark.parametrize("raw", BAD + GOOD)
def test_a_name_is_utf8_exactly_when_its_bytes_are_and_is_shown_as_its_escaped_bytes(raw: bytes) -> None:
    name = os.fsdecode(raw)  # what os.scandir, os.walk and watchfiles hand over
    valid = raw in GOOD
    assert fsnames.is_utf8(name) is valid
    assert fsnames.shown(name) == _escaped(raw)  # gen\xff.py: the bytes, escaped
    assert fsnames.shown(name).encode("utf-8") == (raw if valid else _escaped(raw).encode())  # never raises


def test_a_lone_surrogate_from_json_is_escaped_as_a_code_point_and_the_two_readers_share_one_rule() -> None:
    assert fsnames.shown("a\ud83db") == "a\\ud83db"
    assert fsnames.LONE is safejson._LONE  # one rule for a lone surrogate, wherever it came from
    assert fsnames.encodable({"k\udcff": ["v\udcfe", ("t\ud800", 1)], "n": None}) == {
        "k\\xff": ["v\\xfe", ("t\\ud800", 1)], "n": None}


def _make(root: Path, rel: bytes, text: bytes = b"x = 1\n") -> None:
    path = os.path.join(os.fsencode(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(text)


def test_the_walk_never_raises_keeps_every_valid_name_and_says_each_other_one_once(tmp_path: Path) -> None:
    rng = random.Random(3)
    good_files, bad = set(), []
    for raw in GOOD:
        _make(tmp_path, raw)
        good_files.add(os.fsdecode(os.path.join(os.fsencode(tmp_path), raw)))
    for raw in BAD:
        _make(tmp_path, raw)
        bad.append(raw)
    # a directory that is not UTF-8, holding valid names: never entered; a valid one beside it is
    for raw in rng.sample(BAD, 5):
        _make(tmp_path, b"dir" + raw + b"/inside.py")
        bad.append(b"dir" + raw)
    _make(tmp_path, b"sub/inner.py")
    good_files.add(str(tmp_path / "sub" / "inner.py"))
    fsnames._said.clear()
    with structlog.testing.capture_logs() as said:
        found = {os.path.join(d, f) for d, _, files in walk(tmp_path) for f in files}
        again = {os.path.join(d, f) for d, _, files in walk(tmp_path) for f in files}
    assert found == again == good_files
    skipped = [e for e in said if e["event"] == "fs.name_not_utf8_skipped"]
    assert sorted(e["name"] for e in skipped) == sorted(
        _escaped(os.path.join(os.fsencode(tmp_path), raw)) for raw in bad)  # once each, escaped
    assert all(e["name"].isascii() or fsnames.is_utf8(e["name"]) for e in skipped)


def test_every_encoder_takes_every_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [os.fsdecode(raw) for raw in BAD + GOOD] + ["x\ud83d"]
    # the state db: a cycle naming the file in its reason and record is finished, never left running
    state = State(tmp_path / "state.db")
    for i, name in enumerate(names):
        state.cycle_started(f"c{i}", f"e{i}", "auto-debug", "fp", "check_failed", f"failed in {name}")
        state.cycle_finished(f"c{i}", "rolled_back", f"check changed {name}", {"files": [name], name: 1})
    rows = state._tx("SELECT status, reason, record FROM cycles").fetchall()
    assert len(rows) == len(names) and {r["status"] for r in rows} == {"rolled_back"}
    assert {json.loads(r["record"])["files"][0] for r in rows} == {fsnames.shown(n) for n in names}
    assert state.history(len(names))[0]["status"] == "rolled_back"
    state.close()
    # the log file and stderr, through the configured handlers: no "Logging error"
    errors: list[logging.LogRecord] = []
    monkeypatch.setattr(logging.Handler, "handleError", lambda self, record: errors.append(record))
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    monkeypatch.setattr(sys, "stderr", strict)
    logfile = tmp_path / "logs" / "autod.jsonl"
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = []  # pytest's own capture takes a library's record as it is: only autod's handlers
    try:
        logs.configure_logging(file=logfile, stderr=True)
        log = logs.get_logger("autod.test")
        for name in names:
            log.info(f"changed {name}", path=name, paths=[name], nested={"p": (name,)})
            logging.getLogger("httpx").warning("library names %s", name)
        logs.flush()
    finally:
        logs.configure_logging(file=None, stderr=False)
        root.handlers[:] = saved
    assert errors == []
    lines = [json.loads(line) for line in logfile.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 2 * len(names)
    assert {r["path"] for r in lines if "path" in r} == {fsnames.shown(n) for n in names}
    # git's stdin: a commit message quoting such a name
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.py").write_text("a = 1\n")
    for args in (["add", "a.py"], ["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / "a.py").write_text("a = 2\n")
    change = FileChange("a.py", repo / "a.py", b"a = 1\n", b"a = 2\n", 0o644, 1, 1)
    done = ops.commit_changes(repo, [change], f"fix made {names[0]} pass", "c1")
    assert done["committed"], done
    said = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%s"], capture_output=True)
    assert said.stdout.decode().strip() == f"fix made {fsnames.shown(names[0])} pass"


# -- the watch source -------------------------------------------------------------------------------


def _source(ws: Path, awatch: Any = None) -> WatchSource:
    cfg = WatchConfig(type="watch", paths=["src"], settle_ms=50)  # type: ignore[call-arg]
    extra = {"awatch": awatch} if awatch else {}
    return WatchSource(cfg, ws, ws / ".state", OwnWrites(), **extra)


def _git_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".gitignore").write_text("*.log\n")
    return ws


@pytest.mark.parametrize("seed", range(6))
def test_a_watch_batch_keeps_every_valid_name_beside_names_not_utf8(tmp_path: Path, seed: int) -> None:
    ws = _git_ws(tmp_path)
    rng = random.Random(seed)
    good = [f"src/{n}" for n in ("calc.py", "x.log", *(os.fsdecode(r) for r in rng.sample(GOOD, 8)))]
    bad = [f"src/{os.fsdecode(r)}" for r in rng.sample(BAD, 40)]
    source = _source(ws)
    batch = {str(ws / p) for p in good + bad}
    fsnames._said.clear()
    with structlog.testing.capture_logs() as said:
        ev = asyncio.run(source._batch_event(batch))
    assert ev is not None
    assert ev.payload["paths"] == sorted(p for p in good if not p.endswith(".log"))  # .gitignored: dropped
    assert sorted(e["name"] for e in said if e["event"] == "fs.name_not_utf8_skipped") == sorted(
        fsnames.shown(str(ws / p)) for p in bad)
    # git's stdin takes such names too, should one reach it: asked as their own bytes
    assert source._git_ignored([str(ws / p) for p in bad + good]) == {str(ws / "src" / "x.log")}


def test_a_batch_watchfiles_fails_on_a_name_is_found_again_and_the_watcher_armed_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """watchfiles raises (inside its task group) for a name that is not UTF-8 and drops the changes it
    held: the real save made beside it is still reported, and a new watcher is armed."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "calc.py").write_text("a = 1\n")
    (ws / "src" / "old.py").write_text("b = 1\n")
    # old.py, written before the watcher started, is not found again
    monkeypatch.setattr(watch, "TIMES_SLACK_S", 0.0, raising=False)
    time.sleep(0.05)
    calls: list[int] = []

    def awatch(*roots: Path, stop_event: asyncio.Event, **kw: Any) -> AsyncIterator[set[Any]]:
        calls.append(1)

        async def changes() -> AsyncIterator[set[Any]]:
            if len(calls) == 1:
                await asyncio.sleep(0.05)
                (ws / "src" / "calc.py").write_text("a = 2\n")  # the real save
                _make(ws, b"src/notes\xff.txt")
                raise BaseExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError(
                    f'Unable to decode path "{ws}/src/notes\\xFF.txt" to string')])
            await stop_event.wait()
            yield set()

        return changes()

    async def main() -> None:
        source = _source(ws, awatch)
        events = source.events()
        ev = await asyncio.wait_for(anext(events), 10)
        assert ev.payload["paths"] == ["src/calc.py"]
        waiting = asyncio.ensure_future(anext(events))
        for _ in range(200):
            if len(calls) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(calls) == 2  # a new watcher: watchfiles' failed one is not asked again
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)

    fsnames._said.clear()
    with structlog.testing.capture_logs() as said:
        asyncio.run(main())
    skipped = [e for e in said if e["event"] == "fs.name_not_utf8_skipped"]
    assert [e["name"] for e in skipped] == [f"{ws}/src/notes\\xff.txt"]  # once, though seen twice


def test_a_watchfiles_error_that_is_not_about_a_name_still_ends_the_watch(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)

    def awatch(*roots: Path, **kw: Any) -> AsyncIterator[set[Any]]:
        async def changes() -> AsyncIterator[set[Any]]:
            raise BaseExceptionGroup("g", [RuntimeError("error in underlying watcher: boom")])
            yield set()

        return changes()

    async def main() -> None:
        with pytest.raises(BaseExceptionGroup):
            await asyncio.wait_for(anext(_source(ws, awatch).events()), 10)

    asyncio.run(main())
