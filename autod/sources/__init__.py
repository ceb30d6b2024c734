"""Event sources: each exposes one async iterator of Events and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from autod.events import Event


class Source(Protocol):
    name: str

    def events(self) -> AsyncIterator[Event]:
        """Yield events until cancelled. Raising means the source crashed (it is restarted)."""
        ...
