"""`autod run --once`: its verdict is on the tree it leaves, and every check it judges ran first."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from autod.checks.run import CheckResult
from autod.checks.source import CheckSource
from autod.config.settings import CheckConfig, load_config
from autod.runtime.freshness import CheckLedger, Run
from autod.runtime.once import ERROR, FAILING, GREEN, settle, stale, verdict

CHECKS = {
    "tests": CheckConfig(run="pytest"),
    "lint": CheckConfig(run="ruff check", when=["manual"]),
    "fix": CheckConfig(run="ruff check --fix", fixer=True),
}


def ledger(*runs: Run) -> CheckLedger:
    out = CheckLedger()
    for run in runs:
        out.record(run, CheckResult(run.check, 0 if run.ok else 1, "", 1, error=run.error))
    return out


def test_a_result_older_than_autods_last_write_or_missing_is_run_again_fixers_aside():
    book = ledger(Run("tests", 100, True), Run("lint", 300, True))
    assert stale(CHECKS, book, last_write=200) == ["tests"]  # verified a tree a rollback undid since
    assert stale(CHECKS, ledger(Run("tests", 300, True)), last_write=200) == ["lint"]  # never ran
    assert stale(CHECKS, book, last_write=0) == []


def test_settle_runs_the_stale_checks_and_the_verdict_follows_their_results():
    book = ledger(Run("tests", 100, True), Run("lint", 100, True))

    async def run(name: str) -> None:  # the rollback left the bug in: tests fail on the tree now
        book.record(Run(name, 300, name != "tests", "A" if name == "tests" else None),
                    CheckResult(name, 1 if name == "tests" else 0, "", 1))

    assert asyncio.run(settle(CHECKS, book, 200, run)) == ["tests", "lint"]
    assert verdict(None, CHECKS, book, cycles=1) == FAILING


def test_the_verdict_is_green_only_when_every_judged_check_passes():
    assert verdict(None, CHECKS, ledger(Run("tests", 1, True), Run("lint", 1, True)), 0) == GREEN
    assert verdict(None, CHECKS, ledger(Run("tests", 1, True)), 0) == FAILING  # lint never ran
    assert verdict(None, {}, CheckLedger(), 0) == GREEN
    assert verdict("autod is paused", CHECKS, ledger(Run("tests", 1, True), Run("lint", 1, True)), 0) == ERROR
    broken = ledger(Run("tests", 1, True), Run("lint", 1, False, error="not found"))
    assert verdict(None, CHECKS, broken, 0) == ERROR


def test_once_runs_every_judged_check_at_start_up_whatever_its_when(tmp_path: Path):
    config = tmp_path / "autod.yaml"
    fail = f"{sys.executable} -c 'raise SystemExit(1)'"
    config.write_text(
        f"workspace: {tmp_path}\nchecks:\n"
        f"  nightly: {{run: \"{fail}\", when: ['0 3 * * *'], sandbox: 'off'}}\n"
        f"  fixer: {{run: \"{fail}\", fixer: true, sandbox: 'off'}}\n"
    )
    settings = load_config(config)

    async def first_events(start_all: bool) -> list[str]:
        source = CheckSource(settings, start_all=start_all)
        events: list[str] = []

        async def collect() -> None:
            async for event in source.events():
                events.append(event.payload["check"])

        task = asyncio.create_task(collect())
        await source.started.wait()
        task.cancel()
        return events

    assert asyncio.run(first_events(start_all=True)) == ["nightly"]
    assert asyncio.run(first_events(start_all=False)) == []
