"""What the daemon tells the person watching it, one plain line at a time: that it is ready (its
sources armed, what the start-up checks said) and what each cycle did. The JSON log keeps every
detail; these lines are what a newcomer reads on the terminal, and what tests wait on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog

if TYPE_CHECKING:
    from autod.checks.run import CheckResult
    from autod.cycle.phases import Cycle

log = structlog.get_logger("autod.runtime.narrate")

SAID_CHARS = 400


class Armed(Protocol):
    async def wait_armed(self) -> list[str]: ...


def check_word(result: CheckResult) -> str:
    if result.error:
        return "cannot start"
    return "passed" if result.ok else "failed"


def ready_line(results: Mapping[str, CheckResult], sources: list[str], modes: list[str]) -> str:
    """One sentence: each start-up check's verdict, what is watched, what happens next."""
    ran = [f"{n} {check_word(r)} ({r.duration_ms / 1000:.1f}s)" for n, r in results.items()]
    failed = [n for n, r in results.items() if not r.ok and not r.error]
    watching = [s for s in sources if s != "check"]
    parts = [("start-up checks: " + ", ".join(ran)) if ran else "no start-up checks"]
    if failed:
        parts.append(f"{', '.join(failed)} queued for {' / '.join(modes) or 'no mode'}")
    elif ran:
        parts.append("nothing to fix")
    parts.append(f"armed: {', '.join(watching)}" if watching else "no source watches for changes")
    return "; ".join(parts)


async def announce_ready(sources: Armed, results: Mapping[str, CheckResult], modes: list[str]) -> None:
    """Log `daemon.ready` once every source is armed (the check source after its start-up checks)."""
    armed = await sources.wait_armed()
    checks = {n: check_word(r) for n, r in results.items()}
    log.info("daemon.ready", checks=checks, sources=armed, said=ready_line(results, armed, modes))


def cycle_line(record: Mapping[str, Any]) -> str:
    """A finished cycle in one sentence: what failed, what autod did about it, where to look."""
    status, cid = str(record.get("status")), str(record.get("cycle_id", ""))[:8]
    what = str(record.get("summary") or record.get("kind") or "")[:160]
    files = ", ".join(str(e.get("path")) for e in record.get("edits") or [])
    if status in ("fixed", "improved"):
        did = str(record.get("fix") or record.get("plan_summary") or f"edited {files}")
        checks = ", ".join(f"{c['name']} {'passed' if c.get('exit_code') == 0 else 'failed'}"
                           for c in record.get("checks") or [])
        said = f"{status}: {what}; {did}" + (f"; checks: {checks}" if checks else "")
        delivery = record.get("delivery") or {}
        if delivery.get("branch") or delivery.get("patch"):
            said += f"; delivered to {delivery.get('branch') or delivery.get('patch')}"
        elif files:
            said += f"; in the working tree ({files})"
    elif status == "pending_approval":
        said = f"a proposal waits: `autod approve {record.get('proposal_id')}` ({what})"
    else:
        said = f"{status}: {what}; {str(record.get('reason') or '')[:200]}"
    return f"{said} (autod show {cid})"[:SAID_CHARS]


class CycleNarrator:
    """The dispatcher's observer: one line per finished cycle, on the terminal and in the log. Not one
    of the cycle's own lines (those carry its cycle_id, phase and mode; its record alone has a
    `status`): `cycle` and `outcome` name what it tells of."""

    async def cycle_finished(self, cycle: Cycle) -> None:
        record = cycle.r.record()
        log.info("cycle.outcome", cycle=record.get("cycle_id"), outcome=record.get("status"),
                 said=cycle_line(record))
