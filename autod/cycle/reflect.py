"""REFLECT: the reflection record, the lessons (the cycle's, and one per idea that did not work), and
where they go (log, state db, memory); the attempt counted toward quarantine and the day's booking."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from autod import logs
from autod.candidates.attempts import left_behind
from autod.candidates.replay import to_remember
from autod.events import Event
from autod.linebreaks import lines_of
from autod.memory import Memory
from autod.reflection import Reflection

if TYPE_CHECKING:
    from autod.act.edits import FileChange
    from autod.cycle.limits import Gate
    from autod.stores.state import State

log = structlog.get_logger("autod.cycle.reflect")
log_phases = structlog.get_logger("autod.cycle.phases")  # the quarantine line, as it always was

# outcomes that count as an attempt on the failure's fingerprint (toward quarantine)
ATTEMPT_STATUSES = ("fixed", "improved", "rolled_back", "partly_rolled_back", "rejected", "no_change")


def left_in_files(r: Reflection) -> None:
    """Never a clean `rolled_back` while autod's edit may still be in a file: a rollback that left one
    makes the cycle `partly_rolled_back`, and its reason names the files."""
    left = left_behind(r)
    if left:
        r.status = "partly_rolled_back"
        why = f"rollback left {', '.join(left)}: changed by someone else after autod wrote it"
        r.reason = f"{why}; {r.reason}" if r.reason else why


async def counted(r: Reflection, event: Event, gate: Gate, state: State, last_attempt: dict[str, str] | None,
                  quarantine_after: int) -> None:
    """The cycle's attempt counted on the failure's fingerprint (`r.quarantined` when that quarantines it),
    and the edits it wrote and the tokens it spent booked on the day."""
    if r.status in ATTEMPT_STATUSES:
        attempt = last_attempt
        if r.status == "rejected":
            attempt = {"summary": r.plan_summary or "", "diff": "", "output": f"rejected: {r.reason}"}
        r.quarantined = await state.call(gate.record_attempt, event, r.status, attempt)
        if r.quarantined:
            log_phases.warning("quarantine.added", fingerprint=event.fingerprint, attempts=quarantine_after)
    # a proposal lists the edits it would make but wrote nothing: its approval books them
    written = 0 if r.status == "pending_approval" else len(r.edits)
    await state.call(gate.book, edits=written, tokens=r.tokens["prompt"] + r.tokens["completion"])


async def learned(memory: Memory | None, r: Reflection, event: Event, diff: str,
                  kept: Sequence[FileChange]) -> None:
    """What a cycle that teaches something leaves in memory: its episode and lessons, and for a kept fix
    what a later cycle needs to replay it (autod.candidates.replay). An outage teaches nothing."""
    if memory is None or not teaches(r):
        return
    fixed = r.status in ("fixed", "improved")
    replay = await asyncio.to_thread(to_remember, kept, event.payload) if fixed else ""
    await remember(memory, r, diff, replay=replay)


def distil_lesson(r: Reflection, event: Event) -> str | None:
    """One lesson per finished cycle: what failed, what changed, whether it worked.

    None when the cycle tried nothing against the repository: it failed (the LLM unreachable, a budget
    spent, a stop, autod's own error: nothing about the code), waits for approval, wrote a report, or
    had no plan at all."""
    if not teaches(r) or r.status in ("pending_approval", "reported") or (
        r.status == "no_change" and not r.plan_summary
    ):
        return None
    what = lines_of(event.summary.strip())[0][:300] if event.summary.strip() else event.kind
    files = ", ".join(e["path"] for e in r.edits) or "no files"
    did = lines_of((r.plan_summary or "no plan").strip())[0][:300]
    outcome = {
        "fixed": "it worked: the checks pass",
        "improved": "it helped: fewer failures",
        "rolled_back": "it did NOT work and was rolled back",
        "partly_rolled_back": "it did NOT work; some files were changed by someone else and left as they are",
        "rejected": "the plan was refused by the act rules",
        "failed": "the cycle failed",
        "no_change": "nothing was changed",
    }.get(r.status, r.status)
    why = f" ({r.reason[:200]})" if r.reason and r.status != "fixed" else ""
    return f"[{r.mode}] Failure: {what}. Tried: {did} (edited {files}). Outcome: {outcome}{why}."


def teaches(r: Reflection) -> bool:
    """Whether the cycle's outcome says anything about the repository (worth an episode or a lesson)."""
    return not r.external and r.status != "failed"


EPISODE_DIFF_CHARS = 1200


def episode_text(r: Reflection, diff: str) -> str:
    """An episode for memory: plain sentences and a short diff, never a JSON shape a model would copy."""
    what = lines_of(r.summary.strip())[0][:300] if r.summary.strip() else r.kind
    parts = [f"Failure: {what}."]
    if r.plan_summary:
        parts.append(f"Tried: {lines_of(r.plan_summary.strip())[0][:300]}.")
    outcome = f"Outcome: {r.status}"
    if r.reason:
        outcome += f" ({r.reason[:200]})"
    parts.append(outcome + ".")
    text = " ".join(parts)
    body = "\n".join(ln for ln in lines_of(diff) if not ln.startswith(("diff --git", "index ")))
    if body.strip():
        cut = body[:EPISODE_DIFF_CHARS] + ("\n[... diff cut ...]" if len(body) > EPISODE_DIFF_CHARS else "")
        text += f"\nThe change:\n{cut}"
    return text


def log_reflection(r: Reflection) -> None:
    """The reflection record: one JSON line with phase=reflect (context vars add cycle/event/mode)."""
    rec = r.record()
    for key in ("cycle_id", "event_id", "mode"):
        rec.pop(key)
    level = "warning" if r.status in ("failed", "rejected") else "info"
    getattr(log, level)("cycle.finished", phase="reflect", **rec)


def timing(started: float, spent: dict[str, int]) -> dict[str, int]:
    """Where a cycle's wall time went, from its start (monotonic) and its tally (autod.tally)."""
    wall = int((time.monotonic() - started) * 1000)
    model, checks = spent.get("model", 0), spent.get("checks", 0)
    own = max(0, wall - model - checks)
    return {"wall_ms": wall, "model_ms": model, "checks_ms": checks, "autod_ms": own}


MAX_FAILED_IDEAS = 3  # lessons a cycle stores of candidates that did not fix the failure


def failed_ideas(r: Reflection) -> list[str]:
    """A lesson for each distinct idea the cycle verified that did not fix the failure ("changing X in
    Y did not fix Z"), so a later cycle's prompts tell it what not to try again. The idea the cycle's
    own lesson already tells (its last plan, when that failed too) is left to that lesson."""
    what = lines_of(r.summary.strip())[0][:300] if r.summary.strip() else r.kind
    own = (r.plan_summary or "").strip().split("\n", 1)[0][:200]
    seen = {own} if own and r.status not in ("fixed", "improved") else set()
    out: list[str] = []
    for c in r.candidates:
        idea = str(c.get("idea") or "")
        if c.get("outcome") != "rolled_back" or not idea or idea in seen:
            continue
        seen.add(idea)
        where = ", ".join(str(w) for w in c.get("where") or []) or "the code"
        out.append(f"[{r.mode}] Failure: {what}. Tried: {idea} (changed {where}). "
                   "Outcome: it did NOT work: the checks still failed.")
        if len(out) >= MAX_FAILED_IDEAS:
            break
    return out


async def remember(memory: Memory, r: Reflection, diff: str, *, replay: str = "") -> None:
    """The cycle's episode (N1) and lesson (N2), redacted, written off the cycle's path (deferred).
    `replay`: what a later cycle needs to replay a kept fix (autod.candidates.replay), in the metadata
    of both (a fleet shares lessons, not episodes)."""
    meta = {"fingerprint": r.fingerprint, "mode": r.mode, "status": r.status, "kind": r.kind,
            "cycle_id": r.cycle_id, "replay": replay or None}
    try:
        episode = episode_text(r, diff)
        # deferred: the memory's writer stores them off the cycle's path; the next recall waits for them
        await memory.add_episode(logs.redact_text(episode), meta, defer=True)
        if r.lesson:
            lesson = logs.redact_text(r.lesson)
            await memory.add_lesson(lesson, meta, success=r.status in ("fixed", "improved"), defer=True)
        failed = {**meta, "status": "rolled_back", "replay": None}  # the idea's outcome, not the cycle's
        for idea in failed_ideas(r):
            await memory.add_lesson(logs.redact_text(idea), failed, success=False, defer=True)
    except Exception as exc:  # memory trouble never fails a cycle
        log.warning("memory.write_failed", error=type(exc).__name__, cycle_id=r.cycle_id)


async def observed(memory: Memory, event: Event, mode: str) -> None:
    """OBSERVE's memory: the event as an N0 item (progress noise out, secrets redacted). Memory trouble
    is never a reason to fail a cycle."""
    from autod.localize.excerpt import strip_progress

    # progress dots and timings would make every run of the same failure a new memory
    excerpt = strip_progress(str(event.payload.get("excerpt", "")))[:2000]
    text = logs.redact_text(f"{event.kind}: {event.summary}\n{excerpt}")
    meta = {"kind": str(event.kind), "fingerprint": event.fingerprint, "mode": mode, "event_id": event.id}
    try:
        await memory.observe(text, meta)
    except Exception as exc:
        log.warning("memory.observe_failed", error=type(exc).__name__)
