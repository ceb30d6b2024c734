"""Drive one event source in a test: pump its events into a queue, take the next, or watch for quiet."""

from __future__ import annotations

import asyncio
from typing import Protocol

from autod.events import Event


class Source(Protocol):
    armed: asyncio.Event  # set while the source is watching (autod.sources.Source)

    def events(self) -> object: ...  # an async iterator of Event


class SourceRun:
    def __init__(self, source: Source, *, hang_guard_s: float, quiet_s: float) -> None:
        self.source = source
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.hang_guard_s = hang_guard_s  # a hang guard, not a speed assertion
        self.quiet_s = quiet_s  # how long "nothing happens" is watched for

    async def pump(self) -> None:
        async for event in self.source.events():  # type: ignore[attr-defined]
            await self.queue.put(event)

    async def armed(self) -> None:
        """Until the source watches: a change made after this returns is reported (no "let it arm" sleep)."""
        await asyncio.wait_for(self.source.armed.wait(), self.hang_guard_s)

    async def next(self) -> Event:
        return await asyncio.wait_for(self.queue.get(), self.hang_guard_s)

    async def quiet(self) -> list[Event]:
        """Everything that arrives within the quiet window (an empty list: nothing happened)."""
        await asyncio.sleep(self.quiet_s)
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out
