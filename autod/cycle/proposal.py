"""A plan held for a person: stored with its diff and event until `autod approve`, `reject` or its expiry."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from autod.act.edits import FileChange
    from autod.config.settings import Settings
    from autod.events import Event
    from autod.plan import Plan
    from autod.reflection import Reflection
    from autod.stores.state import State

log = structlog.get_logger("autod.cycle.proposal")


async def store_proposal(state: State, settings: Settings, r: Reflection, mode: str, event: Event, plan: Plan,
                         diff: str, changes: list[FileChange]) -> str:
    """Store the proposal (superseding an older one for the same failure); its id."""
    pid = uuid.uuid4().hex[:10]
    now = time.time()
    superseded = await state.call(
        state.add_proposal,
        {
            "id": pid,
            "cycle_id": r.cycle_id,
            "mode": mode,
            "event": event.model_dump_json(),
            "plan": plan.model_dump_json(),
            "diff": diff,
            "created_at": now,
            "expires_at": now + settings.limits.proposal_ttl_h * 3600,
        },
    )
    log.info("proposal.stored", proposal_id=pid, files=[c.rel for c in changes], superseded=superseded)
    return pid
