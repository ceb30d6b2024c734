"""What becomes a notification: finished cycles (the dispatcher's observer) and the daemon's states
(wedged, a daily budget spent), looked at every few seconds from outside the dispatcher."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from autod.errors import BudgetExhausted
from autod.webhooks import payload
from autod.webhooks.courier import Courier

if TYPE_CHECKING:
    from autod.cycle.phases import Cycle

log = structlog.get_logger("autod.webhooks")

WATCH_S = 2.0
BUDGET_REASONS = ("max_tokens_per_day", "max_edits_per_day")


class CycleAnnouncer:
    """The dispatcher's observer: a finished cycle's notifications go into the outbox (never sent here)."""

    def __init__(self, courier: Courier) -> None:
        self.courier = courier

    async def cycle_finished(self, cycle: Cycle) -> None:
        spent = isinstance(cycle.error, BudgetExhausted)
        for n in payload.from_cycle(cycle.r.record(), budget_spent=spent):
            await self.courier.announce(n)


async def watch_daemon(courier: Courier, dispatcher: Any) -> None:
    """Announce a wedge (once per episode) and a spent daily budget (once per UTC day and kind)."""
    wedged_since: float | None = None
    announced: set[str] = set()  # keys already in the outbox from this run (it dedupes across runs)
    while True:
        if not courier.webhooks():  # nothing to tell anyone: look again later (a reload may add some)
            await asyncio.sleep(WATCH_S)
            continue
        info = dispatcher.progress.wedged()
        if info is not None and wedged_since is None:
            wedged_since = time.time()
            await courier.announce(payload.wedged(info, wedged_since))
        elif info is None:
            wedged_since = None
        reason = str(dispatcher.waiting_reason or "")
        if reason.startswith(BUDGET_REASONS):
            # the outbox remembers delivered keys: the same day's budget is announced once
            n = payload.budget(datetime.now(UTC).strftime("%Y-%m-%d"), reason)
            if n.key not in announced:
                announced.add(n.key)
                await courier.announce(n)
        await asyncio.sleep(WATCH_S)
