"""A check's output is parsed in a worker thread, never on the event loop (it is untrusted and long)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from autod.checks import source as check_source
from autod.checks.run import CheckResult
from autod.checks.source import CheckSource
from autod.config.settings import load_config
from autod.events import Event
from autod.runtime.checkbook import CheckBook
from autod.stores.state import State

OUTPUT = "FAILED tests/t.py::test_x - assert 1 == 2\n" + "x" * 100_000


@pytest.fixture
def parsed_in(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The threads the output was parsed in (the real parser runs; only where it ran is noted)."""
    seen: list[threading.Thread] = []
    real = check_source.parse_failures

    def noting(text: str, **kw: object):  # type: ignore[no-untyped-def]
        seen.append(threading.current_thread())
        return real(text, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(check_source, "parse_failures", noting)
    return seen


def test_a_failed_runs_event_is_built_off_the_loop(tmp_path: Path, parsed_in: list[threading.Thread]) -> None:
    (tmp_path / "autod.yaml").write_text(f"workspace: {tmp_path}\nchecks:\n  tests:\n    run: 'false'\n")
    source = CheckSource(load_config(tmp_path / "autod.yaml"))

    async def go() -> Event | None:
        return await source.event_for(CheckResult("tests", 1, OUTPUT, 10), 1.0)

    event = asyncio.run(go())
    assert event is not None and "test_x" in event.summary
    assert parsed_in and all(t is not threading.main_thread() for t in parsed_in)


def test_a_failed_run_is_fingerprinted_off_the_loop(
    tmp_path: Path, parsed_in: list[threading.Thread]
) -> None:
    state = State(tmp_path / "state.db")
    try:
        async def accept(_e: Event) -> None:
            return None

        run = asyncio.run(CheckBook(tmp_path, state, accept).record(CheckResult("tests", 1, OUTPUT, 10), 1.0))
    finally:
        state.close()
    assert run.fingerprint
    assert parsed_in and all(t is not threading.main_thread() for t in parsed_in)
