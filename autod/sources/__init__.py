"""Event sources: each exposes one async iterator of Events, and says when it is armed.

Here: the file watcher (`watch`), the build-log tailer (`logtail`), `cron`, and the failure parsers
that turn tool output into failures (`parsers`, over `prefilter`, `detectors` and `found`), which the
log tailer and the checks share. The check source runs checks, so it lives with them
(autod.checks.source)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from autod.events import Event


class Source(Protocol):
    name: str
    # Set once `events()` is actually watching: a change made while it is set is reported. A source that
    # has to re-arm (a watched root deleted and re-created) clears it until it watches again. Tests wait
    # on it instead of sleeping "long enough".
    armed: asyncio.Event

    def events(self) -> AsyncIterator[Event]:
        """Yield events until cancelled. Raising means the source crashed (it is restarted)."""
        ...
