"""PLAN's parts around the planner: what memory recalls for the event, what the cycles before this one
tried on the same failure, how the candidate search is set for this planner and mode, and whether the
day's token budget has room for another draw. The draws themselves are autod.candidates'."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from autod.candidates.replay import Replay, for_failure
from autod.events import FAILURE_KINDS, Event
from autod.modes import Attempt
from autod.stores.state import day_key

if TYPE_CHECKING:
    from autod.config.settings import CandidatesConfig, Settings
    from autod.memory import Memory, Recalled
    from autod.reflection import Reflection
    from autod.safety.boundary import Boundary
    from autod.stores.state import State

log = structlog.get_logger("autod.cycle.phases")  # the plan phase's lines, as they always were


async def recall(memory: Memory | None, event: Event, settings: Settings) -> list[Recalled]:
    """What memory holds near this event, within the recall budget; nothing when it is off or in trouble
    (memory trouble must not stop a fix)."""
    if memory is None:
        return []
    query = f"{event.summary}\n{str(event.payload.get('excerpt', ''))[:1500]}"
    budget, k = settings.memory.recall_tokens, settings.memory.recall_k
    try:
        return await memory.recall(query, budget_tokens=budget, k=k)
    except Exception as exc:
        log.warning("memory.recall_failed", error=type(exc).__name__)
        return []


async def earlier(state: State, event: Event) -> tuple[int, Attempt | None]:
    """How many cycles before this one tried the same failure without fixing it, and the last attempt
    they left (what the first prompt is told)."""
    if event.kind not in FAILURE_KINDS:
        return 0, None
    fp = await state.call(state.fingerprint, event.fingerprint)
    cycles = int((fp or {}).get("attempts") or 0)
    last = (fp or {}).get("last_attempt")
    if not last:
        return cycles, None
    summary, diff, output = last.get("summary", ""), last.get("diff", ""), last.get("output", "")
    return cycles, Attempt(summary, diff, output, earlier_cycle=True)


def search_config(settings: Settings, planner_name: str) -> CandidatesConfig:
    """`candidates` for this planner: a deterministic one (the offline rules) gives one plan per prompt."""
    cfg = settings.candidates
    if planner_name != "llm":
        cfg = cfg.model_copy(update={"n": 1, "focused": 0})
    return cfg


def max_attempts(settings: Settings, mode: str) -> int:
    """Attempts a cycle of `mode` makes (re-plans after a rolled-back one): auto-debug's own setting."""
    return settings.modes.get(mode).max_attempts_per_cycle


async def replays(recalled: list[Recalled], boundary: Boundary, event: Event) -> list[Replay]:
    """The fixes memory holds for this failure, to try before any draw (parsed in a worker thread)."""
    return await asyncio.to_thread(for_failure, recalled, boundary, fingerprint=event.fingerprint,
                                   payload=event.payload)


async def tokens_left(state: State, r: Reflection, per_day: int) -> bool:
    """Whether the day's LLM token budget still has room for another draw."""
    spent = await state.call(state.get, f"tokens:{day_key()}")
    return spent + r.tokens["prompt"] + r.tokens["completion"] < per_day
