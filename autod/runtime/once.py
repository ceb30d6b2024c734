"""`autod run --once` (CI, cron): one pass, and its verdict on the tree it leaves.

`--once` runs every configured check (fixers aside) at start-up, whatever its `when:`, works through
the queue, and then makes sure that each check's latest result describes the files as autod leaves
them: a check that has not run, or whose latest result is older than autod's last write to the
workspace (an edit it kept, or a rollback), runs once more. The exit code is the verdict on that
tree, whatever the cycles did or said:

- 0: every configured check (fixers aside) passes on the tree autod leaves, or none is configured;
- 1: at least one of them fails there (nothing could fix it, the fix was rolled back or refused, it
  waits for `autod approve`, its failure is quarantined);
- 2: autod could not do its job, so there is no verdict: another autod owns the state dir, autod is
  paused, limits or a retry would hold it over `ONCE_MAX_WAIT_S` in total, a check cannot start (a
  configuration error), a signal stopped it before it finished, or the dispatcher crashed.

(78 for an invalid config and 130 for Ctrl-C come from `autod.cli.main`, before or around all of this.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import structlog

from autod.config.settings import CheckConfig
from autod.runtime.freshness import CheckLedger

log = structlog.get_logger("autod.runtime.once")

GREEN, FAILING, ERROR = 0, 1, 2


def judged_checks(checks: Mapping[str, CheckConfig]) -> list[str]:
    """The checks whose results decide the verdict (and run at --once's start): all but the fixers."""
    return [name for name, check in checks.items() if not check.fixer]


def stale(checks: Mapping[str, CheckConfig], ledger: CheckLedger, last_write: float) -> list[str]:
    """Judged checks without a result that describes the tree now: never run, or run before autod's
    last write to the workspace."""
    out = []
    for name in judged_checks(checks):
        run = ledger.latest(name)
        if run is None or run.at < last_write:
            out.append(name)
    return out


async def settle(
    checks: Mapping[str, CheckConfig],
    ledger: CheckLedger,
    last_write: float,
    run: Callable[[str], Awaitable[object]],
) -> list[str]:
    """Run each stale check once (`run` records its result in the ledger); returns their names."""
    names = stale(checks, ledger, last_write)
    if names:
        log.info("daemon.once_rechecking", checks=names,
                 reason="no result of theirs describes the tree autod leaves")
    for name in names:
        await run(name)
    return names


def verdict(error: str | None, checks: Mapping[str, CheckConfig], ledger: CheckLedger, cycles: int) -> int:
    """The exit code of `autod run --once` (see the module docstring), logged with its why."""
    if error:
        log.error("daemon.once_error", error=error)
        return ERROR
    cannot_start = {name: run.error for name, run in ledger.runs.items() if run.error}
    if cannot_start:  # a configuration error, not a verdict on the code
        log.error("daemon.once_error", error="checks cannot start", checks=cannot_start)
        return ERROR
    judged = judged_checks(checks)
    failing = [name for name in judged if name not in ledger.results or not ledger.results[name].ok]
    log.info("daemon.once_finished", failing=failing, passing=[n for n in judged if n not in failing],
             cycles=cycles)
    return FAILING if failing else GREEN
