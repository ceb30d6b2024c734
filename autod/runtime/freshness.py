"""Before planning, an event is checked against the present: the latest result of its check decides.

A `check_failed` event is news about one run of one check. By the time the dispatcher leases it, a
newer run may have passed (someone fixed it, or a cycle did), or failed differently (that failure has
its own event). Planning on the old news wastes a cycle at best and, at worst, keeps an edit nobody
needed as `fixed`. The ledger holds the latest run of each check that describes the files as they
are: a run made by verification inside a cycle is only taken when the cycle keeps its edits (the runs
of a rolled-back cycle describe files that no longer exist).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from autod.checks.run import CheckResult
from autod.config.settings import CheckConfig
from autod.events import Event, EventKind


@dataclass(frozen=True)
class Run:
    """One finished run of a check, as the ledger keeps it."""

    check: str
    at: float  # wall-clock time it finished (events carry it as payload["checked_at"])
    ok: bool
    fingerprint: str | None = None  # a failing run: the fingerprint its event carries
    error: str | None = None  # it could not start at all (a configuration error)


@dataclass(frozen=True)
class Judgement:
    """`plan`: the event is current news. Otherwise `reason` says why it is resolved without a cycle,
    or `probe` names a check to run first because no result of it exists yet (e.g. after a restart)."""

    plan: bool
    reason: str = ""
    probe: str | None = None


PLAN = Judgement(True)


class CheckLedger:
    """The latest run and result of each check that describes the workspace as it is."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.results: dict[str, CheckResult] = {}  # the same runs' full results (status, --once, modes)
        self._held: list[tuple[Run, CheckResult]] | None = None

    def latest(self, check: str) -> Run | None:
        return self.runs.get(check)

    def hold(self) -> None:
        """A cycle begins: its verification runs wait for its outcome before they count."""
        self._held = []

    def record(self, run: Run, result: CheckResult) -> list[Run]:
        """Take a run; returns the runs that now count (none while held)."""
        if self._held is not None:
            self._held.append((run, result))
            return []
        self.runs[run.check], self.results[run.check] = run, result
        return [run]

    def release(self, *, keep: bool, since: float = 0.0) -> list[Run]:
        """The cycle ended: its runs count if its edits were kept, else they are forgotten.

        `since`: autod's latest write to the workspace. A run before it verified an attempt that was
        rolled back (a cycle re-plans after a rollback): it describes files that no longer exist."""
        held, self._held = self._held or [], None
        if not keep:
            return []
        current = [(run, result) for run, result in held if run.at >= since]
        for run, result in current:
            self.runs[run.check], self.results[run.check] = run, result
        return [run for run, _ in current]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def judge(event: Event, ledger: CheckLedger, checks: Mapping[str, CheckConfig]) -> Judgement:
    """Whether `event` is still news worth a cycle, given the latest runs of the checks."""
    if event.kind != EventKind.CHECK_FAILED:
        return PLAN  # build logs and file changes carry no result to compare with
    name = event.payload.get("check")
    if not isinstance(name, str):
        return PLAN
    if name not in checks:
        return Judgement(False, f"check {name} is no longer configured")
    latest = ledger.latest(name)
    if latest is None:
        return Judgement(False, probe=name)
    seen_at = float(event.payload.get("checked_at") or 0.0)  # events queued by an older autod: 0
    if latest.at <= seen_at:
        return PLAN
    if latest.error:
        return Judgement(False, f"check {name} cannot start now: {latest.error}")
    if latest.ok:
        return Judgement(False, f"check {name} passed at {_when(latest.at)}, after this failure")
    if latest.fingerprint != event.fingerprint:
        return Judgement(
            False,
            f"superseded: check {name} fails differently since {_when(latest.at)}"
            f" (fingerprint {latest.fingerprint}, its own event)",
        )
    return PLAN  # it still fails the same way: the present agrees with the news
